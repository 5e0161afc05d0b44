"""Run a compiled graph on Spark Structured Streaming: one streaming query per output.

Outputs are the requested sinks (`--sink STREAM=URI`, any named stream), the Materialize nodes
(tables) and the dead letters: one query for the rejected records of every source and the failures
of every stateless operator, one per failure point after a stateful operator or a data store call.
Two or more sinks computed without state or data store share one query instead, which reads each
input once for all of them (deployer.spark.shared).
Each query keeps its own checkpoint under `--checkpoint DIR`, named after its output, so a restart
with the same DIR resumes every output where it stopped (a query's name must not change between
runs of a deployment, or it starts over).

With `until_idle` the queries run with the availableNow trigger, a few at a time (see
`max_concurrent`); the run ends when all have consumed their input.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from deployer import settings
from deployer.connectors.files import file_dir
from deployer.connectors.redis_stream import is_redis_stream_uri, redis_stream_source, redis_stream_writer
from deployer.spark.checkpoint import query_dir
from deployer.spark.expr import col_name
from deployer.spark.interrupt import interruptible
from deployer.spark.plan import FILTERED_METRIC, SEQ, SparkGraph, filters_counted, named
from deployer.spark.shared import (
    SHARED_QUERY,
    Report,
    batch_plans,
    shared_inputs,
    shared_sinks,
    shared_writer,
    stem,
)
from deployer.spark.sinks import (
    INPUT_METRIC,
    SourceError,
    console_batch_writer,
    dead_letter_frame,
    dead_letter_writer,
    file_batch_writer,
    file_source,
    generator_source,
)
from operators import graph as g
from stores.bindings import StoreBindings
from stores.urls import redact_text


@dataclass
class SparkRunStats:
    """What a run did. Every query reads its sources itself, so `rows_in` counts each source's
    records once (the least any query read of it), not once per query; blank lines are no records."""

    batches: int = 0
    rows_in: int = 0
    queries: list[str] = field(default_factory=list)
    dead_lettered: int = 0
    rows_out: int = 0  # rows written to the sinks
    stopped: bool = False  # stopped on request (`run`'s `stop`), not at the end of its input
    applied: int = 0  # rows the stores accepted into tables
    # events a Filter or MultiFilter dropped (the most any query counted); None: not counted
    filtered: int | None = 0
    late: int = 0  # rows the stateful operators dropped behind the watermark (the most any query did)


@dataclass(frozen=True)
class BatchCounts:
    """What one micro-batch of one query reported in its progress."""

    read: dict[str, int]  # per source: records (file sources, observed) or input rows (others)
    filtered: dict[str, int]  # per Filter/MultiFilter node (observed, spark_plan.count_filtered)
    late: int  # rows its stateful operators dropped behind the watermark


def batch_counts(p: Any) -> BatchCounts | None:
    """The counts of one progress report; None for a trigger that ran no batch."""
    if "addBatch" not in (p.get("durationMs") or {}):
        return None
    read: dict[str, int] = {}
    filtered: dict[str, int] = {}
    for name, row in (p.get("observedMetrics") or {}).items():
        if name.startswith(INPUT_METRIC):
            read[name] = int(row["rows"] or 0)
        elif name.startswith(FILTERED_METRIC):
            filtered[name[len(FILTERED_METRIC) :]] = int(row["rows"] or 0)
    for src in p.get("sources") or []:
        key = str(src.get("description"))
        if read and key.startswith("FileStreamSource"):
            continue  # counted by its observation, which leaves out blank lines
        read[key] = read.get(key, 0) + int(src.get("numInputRows") or 0)
    late = sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in p.get("stateOperators") or [])
    return BatchCounts(read, filtered, late)


# What a deployment needs of the session it runs in, whoever built it: UTC, non-ANSI arithmetic
# (failures are found per event and dead-lettered, never left to fail a batch) and the RocksDB
# state store (transformWithStateInPandas, for TUPLE and BATCH windows, supports no other), which
# commits a micro-batch's state changes as a changelog rather than a copy of its files: a stateful
# micro-batch's fixed cost is lower (an ad-hoc comparison in one process). Spark reads a checkpoint
# written either way (its documentation: the setting can be turned on for an existing query).
# Checkpoint files (offsets and commits logs, state store files) are written through Hadoop's
# FileSystem API, not its FileContext API (Spark's default), whose local implementation forks a
# `readlink` and a `chmod` process per file it renames or creates: most of the time a micro-batch
# spent logging its offsets and commit (jstack samples, ad hoc; bench/run's micro-batch rows against
# "Spark's default checkpoint files" measure the difference). Spark's
# FileSystem-based manager renames without an atomic "fail if there" check, which only matters to
# two runs writing one checkpoint at once; deployer.spark.checkpoint's lock refuses the second run.
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    CHECKPOINT_FILE_MANAGER: (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
}


# AF_UNIX socket paths are limited to 107 bytes; Spark names a worker's socket "/.<uuid>.sock" (43).
_UDS_DIR_MAX = 60


def python_worker_conf(master: str) -> dict[str, str]:
    """Session settings for the Python workers (parsing, TUPLE/BATCH state, ReadSQL/UpdateSQL).

    With a local master the executor runs in this process's JVM, and it talks to its Python workers
    over a Unix domain socket instead of loopback TCP: each Python task has a fixed cost of its own
    (bench/run's micro-batch rows), which this lowers. The sockets go to a private directory with a
    short path, removed at exit (Spark leaves socket files behind). Not for a cluster, whose
    executors run on other machines, where that directory does not exist; nor with
    CEP_PYTHON_UDS=0; nor when the temporary directory's path is too long for a socket."""
    if not settings.current().python_uds or not master.startswith("local"):
        return {}
    if len(tempfile.gettempdir()) + len("/cep-uds-xxxxxxxx") > _UDS_DIR_MAX:
        return {}
    directory = tempfile.mkdtemp(prefix="cep-uds-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return {
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.python.unix.domain.socket.dir": directory,
    }


def spark_session(master: str | None = None, app: str = "paascep") -> SparkSession:
    """A session configured for CEP: UTC, few shuffle partitions, quiet logs."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = master or "local[*]"
    conf = settings.current()
    builder = (
        SparkSession.builder.appName(app)
        .master(master)
        .config("spark.sql.shuffle.partitions", str(conf.shuffle_partitions))
        # Bind and advertise the same address: advertising the host's name while bound to loopback
        # makes block fetches (cached batches, shuffles) fail with "connection refused". Set
        # CEP_SPARK_BIND / CEP_SPARK_HOST to the machine's address when executors run elsewhere.
        .config("spark.driver.bindAddress", conf.spark_bind)
        .config("spark.driver.host", conf.advertised_host)
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in {**SESSION_CONF, **python_worker_conf(master)}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(conf.spark_log_level)
    return spark


def stop_session(spark: SparkSession, wait: float = 5.0) -> None:
    """Stop a session this process started, its Python workers first.

    Spark stops its local Python workers by closing their sockets, then signals their daemon; a
    worker that notices its closed socket first prints a BrokenPipeError traceback on its way out
    (pyspark/daemon.py), on the run's standard error, after its last line. Signalled first (SIGTERM),
    the daemon ends its process group's workers with SIGHUP, which they take quietly. Only the
    daemons this driver's JVM started are signalled (a cluster's run on other machines' executors)."""
    try:
        jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    except Exception:  # no JVM left to ask: nothing of ours to signal
        jvm = None
    daemons = _python_daemons(jvm) if jvm is not None else []
    for pid in daemons:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while daemons and time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in daemons):
        time.sleep(0.02)
    spark.stop()


def _python_daemons(parent: int) -> list[int]:
    """The `pyspark.daemon` processes whose parent is `parent` (Linux /proc; none elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent and b"pyspark.daemon" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return found


def _stream(graph: g.Graph, name: str) -> str:
    for s in graph.streams:
        if s.lower() == name.lower():
            return s
    raise ValueError(f"the script has no stream named '{name}'; its streams: {', '.join(graph.streams)}")


class QueryFailed(RuntimeError):
    """A streaming query stopped with an error: the message is its root cause, `detail` all of it."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


# The line that says what went wrong, in the Python traceback Spark wraps an error of a batch in.
_STORE_ERROR = re.compile(r"^stores\.errors\.\w+: (.+)$", re.MULTILINE)
_PYTHON_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def root_cause(text: str) -> str:
    """A data store's error if there is one (its message names the store, URL redacted), else the
    last Python exception of the traceback, else the first line of `text`."""
    for pattern in (_STORE_ERROR, _PYTHON_ERROR):
        found = pattern.findall(text)
        if found:
            last = found[-1]
            return last if isinstance(last, str) else f"{last[0]}: {last[1]}"
    return text.strip().splitlines()[0] if text.strip() else "unknown error"


def drop_interrupted_log_writes(location: Path) -> None:
    """Remove what a crash left of a query's offsets or commits log entry being written.

    Spark writes each entry to a hidden temp file (`.0.<uuid>.tmp`) and renames it into place. A
    crash in between leaves the temp file, which Spark never reads, but which makes Spark 4 refuse,
    on every restart, a query that had not logged its first batch yet: "[STATE_STORE_CHECKPOINT_
    LOCATION_NOT_EMPTY] ... offsets should be empty on batch 0" (SIGKILL at a random point, tests/
    faults/test_materialize_kill.py, left one in the dead letters' query). Dropping it is safe: the
    entry was never written, so the batch is planned again, as after any crash before its offsets.
    """
    for log in ("offsets", "commits"):
        for partial in (location / log).glob(".*.tmp*"):
            partial.unlink(missing_ok=True)


class SparkDeployment:
    """Builds and starts the queries of one script; `run` drives them to the end or forever."""

    def __init__(
        self,
        spark: SparkSession,
        graph: g.Graph,
        sources: Mapping[str, str],
        sinks: Mapping[str, str],
        checkpoint: str | None,
        dead_letter: str | None = None,
        stores: StoreBindings | None = None,
        until_idle: bool = False,
        name: str = "cep",
        max_files_per_trigger: int | None = None,
        on_started: Callable[[str], None] | None = None,
    ):
        self.spark = spark
        for key, value in SESSION_CONF.items():
            # A query records these in its checkpoint when it first starts; a restart keeps them.
            spark.conf.set(key, value)
        self.graph = graph
        self.until_idle = until_idle
        self.name = name
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if checkpoint is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="cep-checkpoint-")
            checkpoint = self._tmp.name
        self.checkpoint = Path(checkpoint)
        frames: dict[str, DataFrame] = {}
        self.rejected: list[tuple[str, DataFrame]] = []
        for src in graph.sources():
            uri = next((u for s, u in sources.items() if s.lower() == src.stream.lower()), None)
            if uri is None:
                raise SourceError(f"stream '{src.stream}' has no input: add --source {src.stream}=file:DIR")
            if uri.startswith("generator:"):
                frames[src.stream] = generator_source(spark, uri, src.schema)
            elif is_redis_stream_uri(uri):
                good, bad = redis_stream_source(spark, uri, src.schema)
                frames[src.stream] = good
                self.rejected.append((src.stream, bad))
            else:
                good, bad = file_source(spark, uri, src.schema, max_files_per_trigger, src)
                frames[src.stream] = good
                self.rejected.append((src.stream, bad))
        for s in sources:
            _stream(graph, s)  # a binding for an unknown stream is a mistake worth reporting
        self.sg = SparkGraph(graph, frames, stores, timed_sources={s for s, _ in self.rejected})
        if name != "cep":  # an explicit deployment name scopes the ledger (see deployer.spark.sql)
            self.sg.deployment = name
        self.sinks = {_stream(graph, s): uri for s, uri in sinks.items()}
        first = next((file_dir(u) for u in self.sinks.values() if file_dir(u) is not None), None)
        if dead_letter == "console":
            self.dead_dir: Path | None = None
        elif dead_letter:
            self.dead_dir = file_dir(dead_letter) or Path(dead_letter)
        else:
            self.dead_dir = (first.parent / "dead-letter") if first else Path("dead-letter")
        self.queries: list[StreamingQuery] = []
        # With --until-idle every query ends once it has consumed the input, so they need not all
        # run at once: a few at a time, so that the Python workers they start (parsing, TUPLE and
        # BATCH state) do not starve each other on a small machine (a worker that cannot connect
        # back to the JVM within its timeout fails the query).
        self.max_concurrent = settings.current().max_queries or max(2, spark.sparkContext.defaultParallelism)
        self._pending: list[tuple[DataFrame, str, Any]] = []
        # rows the writers wrote (they run in this process); "applied": rows stored into tables
        self.written = {"out": 0, "dead": 0, "applied": 0}
        # query name -> batch id -> its counts, taken from the progress as the run goes: a query
        # keeps only its last spark.sql.streaming.numRecentProgressUpdates (100) reports
        self.counts: dict[str, dict[int, BatchCounts]] = {}
        self.on_started = on_started  # told each query's name once it has started (deployer.spark.checkpoint)
        self._stopping = threading.Event()  # set by stop_between_batches: no writer begins a batch
        # batch id -> what the shared query's writer counted in it (spark_shared)
        self.shared_reports: dict[int, Report] = {}

    def _start(self, df: DataFrame, name: str, writer: Any) -> None:
        self._pending.append((df, name, writer))
        self._launch()

    def _launch(self) -> None:
        while self._pending and (
            not self.until_idle or sum(1 for q in self.queries if q.isActive) < self.max_concurrent
        ):
            df, name, writer = self._pending.pop(0)
            w = df.writeStream.queryName(f"{self.name}:{name}").foreachBatch(self._gated(writer))
            w = w.option("checkpointLocation", str(self.checkpoint / query_dir(name)))
            w = w.trigger(availableNow=True) if self.until_idle else w.trigger(processingTime="0 seconds")
            drop_interrupted_log_writes(self.checkpoint / query_dir(name))
            self.queries.append(w.start())
            if self.on_started is not None:
                self.on_started(name)

    def _gated(self, writer: Callable[[DataFrame, int], None]) -> Callable[[DataFrame, int], None]:
        """`writer`, unless the run is stopping: then a batch that has not begun writing fails before
        it touches its DataFrame (lazy: nothing of the batch runs, no store is called), is not
        committed, and is replayed whole on restart. A batch the stop interrupts while it writes
        fails in a few lines (deployer.spark.interrupt)."""
        interrupted = interruptible(writer)

        def write(df: DataFrame, batch_id: int) -> None:
            if self._stopping.is_set():
                raise RuntimeError(f"batch {batch_id} left to the next run: this one is stopping")
            interrupted(df, batch_id)

        return write

    def _sink_writer(self, stream: str, uri: str) -> Callable[[DataFrame, int], None]:
        port = self.graph.streams[stream]
        schema = self.graph.stream_schema(stream)
        # Each batch is written in the reference executor's order: event time, then arrival.
        ts = self.sg.event_time_index(port)
        order = ([col_name(ts)] if ts is not None else []) + [SEQ]
        if uri == "console":
            tagged = sum(1 for u in self.sinks.values() if u == "console") > 1
            return console_batch_writer(stream, schema.names, tagged, order, self._count("out"))
        if is_redis_stream_uri(uri):
            return redis_stream_writer(uri, stream, schema.names, order)
        d = file_dir(uri)
        if d is None:
            raise ValueError(
                f"sink '{stream}': unsupported URI {redact_text(uri)!r}; use file:DIR, redis://...?stream=KEY or console"
            )
        return file_batch_writer(d, stream, schema.names, order, self._count("out"))

    def _shared_report(self, batch_id: int, report: Report) -> None:
        self.shared_reports[batch_id] = report
        for old in sorted(self.shared_reports)[:-200]:  # progress keeps the last 100 batches
            del self.shared_reports[old]

    def start(self) -> None:
        together = shared_sinks(self.graph, self.sinks)
        if together:
            # One query for the sinks that need no state: it reads each input once (spark_shared).
            inputs = shared_inputs(self.graph, together)
            writers = {stream: self._sink_writer(stream, self.sinks[stream]) for stream in together}
            plan = batch_plans(self.graph, self.sg.stores_config, self.sg.timed_sources)
            stem_df = stem(self.sg.sources, inputs)
            write = shared_writer(self.graph, inputs, writers, plan, self._shared_report)
            self._start(stem_df, SHARED_QUERY, write)
        for stream, uri in self.sinks.items():
            if stream in together:
                # translated all the same, for the dead letters of its operators (below)
                self.sg.port(self.graph.streams[stream])
            else:
                self._start(
                    self.sg.port(self.graph.streams[stream]), f"sink:{stream}", self._sink_writer(stream, uri)
                )
        for node in self.graph.nodes:
            if isinstance(node, g.Materialize):
                from deployer.spark.sql import materialize_writer

                df = named(self.sg.port(node.inputs[0]), node.input_schema)
                refused = dead_letter_writer(
                    self.dead_dir,
                    f"table-{node.table.name}",
                    {"stage": "Materialize", "node": node.id, "line": node.line},
                    counted=self._count("dead"),
                )
                write = materialize_writer(self.sg, node, refused, applied=self._count("applied"))
                self._start(df, f"table:{node.table.name}", write)
        for node in self.graph.nodes:
            if isinstance(node, g.UpdateSQL):
                # An UpdateSQL's statements are effects of their own: they run whether or not its
                # output reaches a sink or a table, as in the reference executor. Translating it
                # gives it a dead-letter query (below), which executes it for every event.
                self.sg.port(g.Port(node.id))
        # Dead letters: the rejected records of every source and the failures of every stateless
        # operator share one query (one DataFrame shape, `dead_letter_frame`); a failure after a
        # stateful operator or a data store call gets a query of its own, which re-runs that part.
        shared: list[DataFrame] = []
        for stream, bad in self.rejected:
            # rejected records, and the Source's events without event time (see file_source)
            shared.append(dead_letter_frame(bad, {"stage": "input", "stream": stream}))
        seen: dict[str, int] = {}
        for dl in self.sg.dead_letters:
            where = {"stage": dl.stage, "stream": dl.stream, "node": dl.node, "line": dl.line}
            frame = dead_letter_frame(dl.df, where)
            if dl.stateless:
                shared.append(frame)
                continue
            # A node may split off failed rows in more than one place (an Aggregate: its input
            # events and its result rows); each is a query of its own, numbered in plan order.
            k = seen[dl.node] = seen.get(dl.node, 0) + 1
            name = dl.node if k == 1 else f"{dl.node}-{k}"
            self._start(
                frame, f"failed:{name}", dead_letter_writer(self.dead_dir, name, counted=self._count("dead"))
            )
        if shared:
            union = shared[0]
            for frame in shared[1:]:
                union = union.unionByName(frame)
            self._start(
                union,
                "dead-letters",
                dead_letter_writer(self.dead_dir, "stateless", counted=self._count("dead")),
            )

    def _count(self, what: str) -> Callable[[int], None]:
        def add(n: int) -> None:
            self.written[what] += n

        return add

    def run(
        self, progress_every: float = 5.0, out: Any = sys.stderr, stop: threading.Event | None = None
    ) -> SparkRunStats:
        """Run the queries until they have consumed their input (until_idle) or `stop` is set: then
        each query is stopped between two micro-batches (see `stop_between_batches`)."""
        stopped = False
        if stop is None or not stop.is_set():
            self.start()
        ui = self.spark.sparkContext.uiWebUrl
        if ui:
            print(f"spark UI: {ui}", file=out)
        last = time.monotonic()
        try:
            while self._pending or any(q.isActive for q in self.queries):
                if stop is not None and stop.is_set():
                    # Checked before failures: a stop from a terminal's Ctrl-C reaches Spark's Python
                    # workers too, and a batch it breaks is not a failure of the run (the batch stays
                    # in the checkpoint and is replayed on restart).
                    print("stopping: letting the micro-batches in progress finish", file=out)
                    self.stop_between_batches()
                    stopped = True
                    break
                for q in self.queries:
                    if q.exception() is not None:
                        raise self._failed(q.name, q.exception())
                self._launch()
                time.sleep(0.1)
                if time.monotonic() - last >= progress_every:
                    last = time.monotonic()
                    self.absorb_progress()
                    print(self.progress_line(), file=out)
            for q in self.queries if not stopped else ():
                exc = q.exception()
                if exc is not None:
                    raise self._failed(q.name, exc)
        finally:
            self.stop()
        stats = SparkRunStats(
            queries=[q.name for q in self.queries],
            rows_out=self.written["out"],
            dead_lettered=self.written["dead"],
            stopped=stopped,
            applied=self.written["applied"],
        )
        self.absorb_progress()
        read: dict[str, int] = {}
        filtered: dict[str, int] = {}
        for batches in self.counts.values():
            stats.batches += len(batches)
            per_source: dict[str, int] = {}
            per_node: dict[str, int] = {}
            for b in batches.values():
                for key, n in b.read.items():
                    per_source[key] = per_source.get(key, 0) + n
                for key, n in b.filtered.items():
                    per_node[key] = per_node.get(key, 0) + n
            for key, n in per_source.items():
                # The least any query read: a query whose plan reads a source twice (two
                # branches of a union) counts its input rows twice.
                read[key] = min(read.get(key, n), n)
            for key, n in per_node.items():
                # Every query that runs a node counts the same events; one that stopped early, fewer.
                filtered[key] = max(filtered.get(key, n), n)
            # Each query runs the stateful operators upstream of its output: the most any query dropped.
            stats.late = max(stats.late, sum(b.late for b in batches.values()))
        stats.rows_in = sum(read.values())
        stats.filtered = sum(filtered.values()) if filters_counted() else None
        return stats

    def absorb_progress(self) -> None:
        """Take the counts of the batches each query has reported since the last call."""
        for q in self.queries:
            seen = self.counts.setdefault(q.name, {})
            for p in q.recentProgress:
                batch = int(p["batchId"])
                if batch not in seen and (counts := batch_counts(p)) is not None:
                    if q.name == f"{self.name}:{SHARED_QUERY}" and batch in self.shared_reports:
                        counts = replace(counts, filtered=self.shared_reports[batch].filtered)
                    seen[batch] = counts

    def _failed(self, query: str, exc: Any) -> QueryFailed:
        resume = (
            "; its unfinished batch is kept in the checkpoint: run the same command again to resume"
            if self._tmp is None
            else ""
        )
        err = QueryFailed(f"query {query} failed: {root_cause(str(exc))}{resume}", str(exc))
        err.__cause__ = RuntimeError(str(exc))  # the whole of it, under `cep --debug`
        return err

    def progress_line(self) -> str:
        parts = []
        for q in self.queries:
            p = q.lastProgress
            if not p:
                continue
            parts.append(
                f"{q.name.split(':', 1)[1]}: batch {p['batchId']}, "
                f"in {p.get('inputRowsPerSecond', 0.0):.0f}/s, processed {p.get('processedRowsPerSecond', 0.0):.0f}/s"
            )
        for name, (hits, misses, loads) in sorted(self.sg.cache_counters.items()):
            parts.append(f"cache {name}: {hits.value} hits, {misses.value} misses, {loads.value} loads")
        return "progress: " + ("; ".join(parts) if parts else "starting")

    def stop_between_batches(self, timeout: float | None = None) -> None:
        """Let the micro-batch each query is writing finish, and begin no other: then stop the
        queries. Queries not started yet (until_idle runs a few at a time) are not started. A query
        still busy after `timeout` seconds (CEP_STOP_TIMEOUT, default 10) is stopped in its batch.

        Spark cannot stop a query between two batches: with more input waiting, the next batch
        begins as soon as one ends, and `StreamingQuery.stop` cuts it short. So the writers are
        closed first (`_gated`): a query whose next batch reaches its writer fails there, having
        written nothing, and ends. Either way a batch not finished is not committed in the
        checkpoint, and the restart replays it with the same id and events (docs/guarantees.md).
        """
        if timeout is None:
            timeout = settings.current().stop_timeout_s
        self._pending.clear()
        self._stopping.set()
        deadline = time.monotonic() + timeout
        # A query ended by its closed writer fails, and Spark and py4j log that failure with pages of
        # stack traces: not an error of this run, so the logs are silenced while the queries stop.
        py4j, level = logging.getLogger("py4j"), logging.getLogger("py4j").level
        py4j.setLevel(logging.CRITICAL)
        self.spark.sparkContext.setLogLevel("OFF")
        try:
            busy = list(self.queries)
            while busy:
                for q in list(busy):
                    with contextlib.suppress(Exception):  # a query that fails now is stopped anyway
                        if q.isActive and q.status["isTriggerActive"] and time.monotonic() < deadline:
                            continue  # writing its last batch, or about to fail at its closed writer
                        q.stop()
                    busy.remove(q)
                time.sleep(0.02)
        finally:
            self.spark.sparkContext.setLogLevel(settings.current().spark_log_level)
            py4j.setLevel(level)

    def stop(self) -> None:
        for q in self.queries:
            try:
                if q.isActive:
                    q.stop()
            except Exception:  # a query stopping during shutdown may raise; it is stopped either way
                pass
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
