"""The Spark session of the tests, and of the fuzzer's soak runs (tests/fuzz/soak.py): configured as
`cep run` configures its own (`SESSION_CONF`, the Python workers), with cheaper settings for small
jobs (two shuffle partitions, no UI) and logs at ERROR."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def make_spark_session(warehouse: Path, app: str = "paascep-tests") -> Any:
    # Executors' Python workers must use this interpreter (the venv), not whatever `python3` is.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from deployer.spark.session import SESSION_CONF, python_worker_conf

    builder = SparkSession.builder
    # as `cep run` has them: what every deployment needs of its session, and the Python workers
    for key, value in {**SESSION_CONF, **python_worker_conf("local[2]")}.items():
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        # Keep spark-warehouse/ and metastore_db/ out of the working tree.
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.log.level", "ERROR")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
