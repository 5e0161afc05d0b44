"""`cep run --engine spark`: a SparkDeployment in a session of its own, stopped on SIGTERM or SIGINT
between micro-batches.

A run with --checkpoint first checks the directory (deployer.spark.run.checkpoint) before Spark starts, so
a refused checkpoint starts no query and writes nothing anywhere.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from deployer.engine import RunRequest, RunSummary, check_bindings, stop_requests
from deployer.spark.run.checkpoint import CheckpointGuard
from deployer.spark.run.launch import launch
from deployer.spark.run.session import finish_jvm, jvm_log, run_log, spark_session
from deployer.spark.run.stop import stop_session
from stores.bindings import StoreBindings


def run(req: RunRequest, stores: StoreBindings | None, out: Any) -> RunSummary:
    check_bindings(req.graph, req.sources, req.sinks)
    guard = None
    if req.checkpoint is not None:
        guard = CheckpointGuard.open(Path(req.checkpoint), req.graph, req.sources, req.sinks)
    # A session this run starts (the CLI's) is stopped before the summary is printed, its Python
    # workers quietly (deployer.spark.run.stop): left to the process's exit, a worker may print a
    # BrokenPipeError traceback after the summary. A session the caller had (tests, a program
    # embedding the run) is left to it.
    owned = SparkSession.getActiveSession() is None
    spark = None
    try:
        # Spark's own output goes to a file beside the checkpoint (deployer.spark.run.session), when
        # this run starts the JVM; a caller's JVM keeps its own. The JVM starts while the deployment's
        # modules are imported (deployer.spark.run.launch).
        log = run_log(req.checkpoint) if owned else None
        launched = launch(req.master, log, req.until_idle) if log is not None else None
        from deployer.spark.run.deployment import SparkDeployment

        spark = spark_session(
            req.master,
            log=log,
            bounded=req.until_idle,
            launched=launched.wait if launched is not None else None,
        )
        if owned and jvm_log() is not None:
            print(f"spark log: {jvm_log()}", file=out)
        # After the session: PySpark's SparkContext puts a SIGINT handler of its own in place (cancel
        # every job, raise KeyboardInterrupt), which would cut the batches short.
        with stop_requests() as (stop, signals):
            deployment = SparkDeployment(
                spark,
                req.graph,
                req.sources,
                req.sinks,
                req.checkpoint,
                req.dead_letter,
                stores,
                req.until_idle,
                max_files_per_trigger=req.max_files_per_trigger,
                on_started=guard.started if guard is not None else None,
            )
            stats = deployment.run(out=out, stop=stop)
    except KeyboardInterrupt:
        owned = False  # a second signal stops the run at once: the process's exit ends Spark
        raise
    finally:
        if owned and spark is not None:
            stop_session(spark)
            # the first bounded run writes the JVM's class archive (deployer.spark.run.jvm_archive)
            finish_jvm(lambda line: print(line, file=out))
        if guard is not None:
            guard.release()  # the next run on this checkpoint may start
    return RunSummary(
        "spark",
        stats.rows_in,
        stats.rows_out,
        stats.dead_lettered,
        stats.late,
        (signals[0] if signals else signal.SIGTERM) if stats.stopped else None,
        applied=stats.applied,
        filtered=stats.filtered,
    )
