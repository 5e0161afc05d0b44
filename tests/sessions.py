"""The Spark session of the tests, and of the fuzzer's soak runs (tests/fuzz/soak.py): configured as
`cep run` configures its own (`SESSION_CONF`, the Python workers), with cheaper settings for small
jobs (two shuffle partitions, no UI) and logs at ERROR, the JVM's output in a log file."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def make_spark_session(
    warehouse: Path, app: str = "paascep-tests", log: Path | None = None, driver_memory: str | None = None
) -> Any:
    """The session; its JVM, when this call starts one, writes its output to `log` (if given) and
    gets `driver_memory` of heap (Spark's default, 1g, when None)."""
    # Executors' Python workers must use this interpreter (the venv), not whatever `python3` is.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from deployer.spark.run import class_path
    from deployer.spark.run.session import CONTEXT_CONF, SESSION_CONF, launch_jvm, python_worker_conf

    options = {
        **SESSION_CONF,
        **python_worker_conf("local[2]"),  # as `cep run` has them: what every deployment needs
        **class_path.conf(
            "local[2]"
        ),  # the project's jars (checkpoint files without a `chmod` each), as `cep run`'s
        "spark.master": "local[2]",
        "spark.app.name": app,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        # Keep spark-warehouse/ and metastore_db/ out of the working tree.
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.log.level": "ERROR",
    }
    if driver_memory is not None:
        options["spark.driver.memory"] = driver_memory
    if log is not None and SparkContext._gateway is None:  # else a `cep run` in this process: its JVM
        launch_jvm({**options, **CONTEXT_CONF}, log)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
