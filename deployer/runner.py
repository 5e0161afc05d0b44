"""`cep run`, independent of the engine: bind data stores, then hand the graph to an executor.

On Spark, a run with --checkpoint first checks the directory (deployer.spark.checkpoint), and SIGTERM or
SIGINT (Ctrl-C) stop it between micro-batches rather than killing it (`stop_requests`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from deployer import settings
from operators import graph as g

if TYPE_CHECKING:
    from stores.bindings import StoreBindings


@dataclass(frozen=True)
class RunRequest:
    graph: g.Graph
    engine: str = "spark"
    sources: dict[str, str] = field(default_factory=dict)
    sinks: dict[str, str] = field(default_factory=dict)
    stores: dict[str, str] = field(default_factory=dict)
    dead_letter: str | None = None
    until_idle: bool = False
    checkpoint: str | None = None
    master: str | None = None
    max_files_per_trigger: int | None = None  # Spark file sources; the local engine reads file by file


@dataclass(frozen=True)
class RunSummary:
    """The counts of a run (docs/guarantees.md, "Counting events"): for a script with one output
    that keeps events one for one, events_in = applied (or events_out) + dead_lettered + filtered
    + late."""

    engine: str
    events_in: int  # records read: events and the records rejected as input
    events_out: int  # rows written to the requested sinks
    dead_lettered: int  # records and events dead-lettered (late events are counted in `late`)
    late: int
    stopped_by: int | None = None  # the signal that stopped the run before the end of its input
    applied: int = 0  # rows the stores accepted into tables
    filtered: int | None = 0  # events dropped by a WHERE (Filter/MultiFilter); None: not counted


@contextlib.contextmanager
def stop_requests() -> Iterator[tuple[threading.Event, list[int]]]:
    """While inside: the first SIGTERM or SIGINT sets the event (and is recorded in the list), for
    the run to stop between micro-batches; a second one raises KeyboardInterrupt, to stop at once.

    Only the main thread can own signals; elsewhere (a run inside another program) the event is
    never set by a signal and the caller's handlers stay as they are.
    """
    event, got = threading.Event(), list[int]()
    if threading.current_thread() is not threading.main_thread():
        yield event, got
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        got.append(signum)
        event.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield event, got
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def data_dir() -> Path:
    """Where embedded SQLite stores live when a data store is not bound to a URL."""
    return settings.current().data_dir


def bind_stores(graph: g.Graph, cli: dict[str, str]) -> StoreBindings | None:
    """The script's data stores bound to URLs, with the retry policy of the settings, or None when
    it declares none."""
    if not graph.stores:
        if cli:
            raise ValueError(f"--store given, but the script declares no data store ({', '.join(cli)})")
        return None
    from stores.bindings import resolve_bindings
    from stores.retry import RetryPolicy

    conf = settings.current()
    retry = RetryPolicy(tries=conf.store_retries, base_s=conf.store_retry_base_ms / 1000)
    return resolve_bindings(graph.stores, cli, os.environ, data_dir(), retry=retry)


def run_script(req: RunRequest, out: Any = sys.stderr) -> RunSummary:
    config = bind_stores(req.graph, req.stores)
    if config is not None:
        for name, url in config.urls.items():
            print(f"data store {name}: {url.redacted()}", file=out)
    if req.engine == "local":
        from deployer.local.driver import run_local
        from stores.registry import StoreRegistry

        registry = StoreRegistry(config) if config is not None else None
        try:
            stats = run_local(
                req.graph, req.sources, req.sinks, registry, req.dead_letter, until_idle=req.until_idle
            )
        finally:
            if registry is not None:
                registry.close()
        summary = RunSummary(
            "local",
            # the records read: the executor counts the events it accepted, the rejected records
            # are dead letters of stage "input" (Spark's count includes them too)
            stats.total_in + stats.dead_lettered.get("input", 0),
            # events written to the requested sinks (not every intermediate stream)
            sum(n for name, n in stats.events_out.items() if name.lower() in {k.lower() for k in req.sinks}),
            sum(stats.dead_lettered.values()),
            sum(stats.late.values()),
            applied=stats.total_applied,
            filtered=stats.total_filtered,
        )
    else:
        guard = None
        if req.checkpoint is not None:
            from deployer.spark.checkpoint import CheckpointGuard

            # Before Spark starts: a refused checkpoint starts no query and writes nothing anywhere.
            guard = CheckpointGuard.open(Path(req.checkpoint), req.graph, req.sources, req.sinks)
        from pyspark.sql import SparkSession

        from deployer.spark.deployment import SparkDeployment, spark_session, stop_session

        # A session this run starts (the CLI's) is stopped before the summary is printed, its Python
        # workers quietly (spark_run.stop_session): left to the process's exit, a worker may print
        # a BrokenPipeError traceback after the summary. A session the caller had (tests, a program
        # embedding the run) is left to it.
        owned = SparkSession.getActiveSession() is None
        spark = None
        try:
            spark = spark_session(req.master)
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
                    config,
                    req.until_idle,
                    max_files_per_trigger=req.max_files_per_trigger,
                    on_started=guard.started if guard is not None else None,
                )
                stats_s = deployment.run(out=out, stop=stop)
        except KeyboardInterrupt:
            owned = False  # a second signal stops the run at once: the process's exit ends Spark
            raise
        finally:
            if owned and spark is not None:
                stop_session(spark)
            if guard is not None:
                guard.release()  # the next run on this checkpoint may start
        summary = RunSummary(
            "spark",
            stats_s.rows_in,
            stats_s.rows_out,
            stats_s.dead_lettered,
            stats_s.late,
            (signals[0] if signals else signal.SIGTERM) if stats_s.stopped else None,
            applied=stats_s.applied,
            filtered=stats_s.filtered,
        )
    counts = (
        f"{summary.events_in} events in, {summary.events_out} out, {summary.applied} applied, "
        f"{summary.dead_lettered} dead-lettered, "
        f"{'? (not counted: CEP_COUNT_FILTERED=0)' if summary.filtered is None else summary.filtered} filtered, "
        f"{summary.late} late"
    )
    if summary.stopped_by is None:
        print(f"done ({summary.engine}): {counts}", file=out)
    elif req.checkpoint is not None:
        print(
            f"stopped ({summary.engine}): {counts}; run the same command with the same --checkpoint "
            "to resume",
            file=out,
        )
    else:
        print(
            f"stopped ({summary.engine}): {counts}; without --checkpoint its progress is not kept: "
            "a new run starts from the beginning of the input",
            file=out,
        )
    return summary
