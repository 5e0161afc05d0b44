"""The Python workers' daemon started while the driver builds and plans a deployment's first queries.

With a local master every Python task of a query (a source's reader, the Sequencer, a stateful
processor, a ReadSQL) runs in a worker forked from one daemon (worker_path/cep_daemon.py), which
imports pandas, pyarrow and the project's modules before it forks: close to a second on the
machine of the README's figures. Spark starts that daemon when the first task needs it, that is,
once the first micro-batch's plan is ready: until then the executor's cores wait on the driver, and
then the micro-batch waits on the daemon. A one-row Python job run in a thread when the session is
made starts it at the same time as the driver's own work, so the first micro-batch finds it ready;
the same thread loads RocksDB's native library for the first state store (ad hoc, `cep run
--until-idle` of the small bench's stateless job: docs/architecture.md, "What a run costs on Spark").

The job must reach the daemon the queries' tasks use: Spark keeps one per Python executable, worker
module and environment, and SESSION_CONF's simplified-traceback setting is what kept the
stateful processors' tasks (which never set it) apart from the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

if TYPE_CHECKING:  # the module is imported before the JVM starts: pyarrow is not needed for that
    import pyarrow as pa

log = logging.getLogger(__name__)


def _same(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def _run(spark: SparkSession) -> None:
    try:
        spark.range(1, numPartitions=1).mapInArrow(_same, "id long").collect()
        # RocksDB's native library, which the first state store of the JVM loads (SESSION_CONF's
        # provider: every stream with a WATERMARK has a stateful Sequencer): ~150 ms, ad hoc
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.rocksdb.RocksDB.loadLibrary()
    except Exception as err:  # the session stopped first, or workers cannot start: a query says so
        log.debug("warming the Python workers did not finish: %s", err)


def warm_python_workers(spark: SparkSession) -> None:
    """Start the Python workers' daemon of `spark`'s local executor in the background."""
    threading.Thread(target=_run, args=(spark,), name="cep-warm-python-workers", daemon=True).start()
