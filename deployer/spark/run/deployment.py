"""Run a compiled graph on Spark Structured Streaming: one streaming query per output.

Which queries a script becomes, and their names, is `deployer.spark.run.queries.plan_queries`: the requested
sinks (two or more without state or data store share one query, which reads each input once for all of them:
deployer.spark.run.shared), the tables, and the dead letters. Each query keeps its own checkpoint under
`--checkpoint DIR`, named after its output, so a restart with the same DIR resumes every output where it
stopped (a query's name must not change between runs, or it starts over). With `until_idle` they run with the
availableNow trigger, a few at a time (`max_concurrent`); the run ends when all have read their input."""

from __future__ import annotations

import contextlib
import logging
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from deployer import settings
from deployer.engine import check_bindings
from deployer.spark.datastores.materialize import TableOutput, materialize_writer, table_shape
from deployer.spark.handlers import handlers_for
from deployer.spark.run import dead_letter_owners, progress, shared_record
from deployer.spark.run.checkpoint import query_dir
from deployer.spark.run.dead_letter_owners import owners_of
from deployer.spark.run.failures import along, dead_letters, failure_queries, stateless_on_driver
from deployer.spark.run.gate import Gate
from deployer.spark.run.inputs import read_inputs, source_uri, stream_named
from deployer.spark.run.layout import earlier_layout, planned, translation
from deployer.spark.run.pattern_groups import PREFIX
from deployer.spark.run.pattern_query import pattern_query
from deployer.spark.run.progress import QueryFailed, SparkRunStats
from deployer.spark.run.queries import (
    DEAD_LETTERS,
    Query,
    shared_inputs,
    store_kinds,
)
from deployer.spark.run.query import spark_name
from deployer.spark.run.query_logs import drop_interrupted_log_writes
from deployer.spark.run.reclaim import give_back
from deployer.spark.run.reporter import Reporter, progress_text
from deployer.spark.run.session import prepare_session, set_log_level, shuffle_partitions
from deployer.spark.run.shared import driver_splits, plans_of, shared_writer, stem
from deployer.spark.run.starting import query_settings, started_with
from deployer.spark.run.stateless_groups import is_shared
from deployer.spark.streams.dead_letters import DeadLetterWriter, dead_letter_dir
from deployer.spark.streams.driver_rows import DriverSink
from deployer.spark.streams.sinks import Writer, sink_writer
from deployer.spark.streams.spool import Spool
from deployer.spark.translate.graph import SparkGraph, filters_counted
from operators import graph as g
from stores.bindings import StoreBindings


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
        prepare_session(spark)
        self.graph = graph
        self.until_idle = until_idle
        self.name = name
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if checkpoint is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="cep-checkpoint-")
            checkpoint = self._tmp.name
        self.checkpoint = Path(checkpoint)
        self.sources = {src.stream: source_uri(src, sources) for src in graph.sources()}
        check_bindings(graph, dict(sources), dict(sinks))  # a binding for an unknown stream is a mistake
        self.sinks = {stream_named(graph, s): uri for s, uri in sinks.items()}
        self.dead_dir = dead_letter_dir(dead_letter, self.sinks.values())
        kept = earlier_layout(self.checkpoint)
        self.plan = planned(self.checkpoint, graph, self.sinks, self.sources, store_kinds(stores), kept)
        self.spool = Spool(self.checkpoint / "spool", {q.name: q.spooled for q in self.plan if q.spooled})
        self.inputs = inputs = read_inputs(
            spark, graph, self.sources, self.checkpoint, max_files_per_trigger, self.spool, self.sinks
        )
        handlers = handlers_for(*translation(self.checkpoint))
        self.sg = SparkGraph(graph, inputs.frames, handlers, stores, timed_sources=set(inputs.parsed))
        if name != "cep":  # an explicit deployment name scopes the ledger (see deployer.spark.datastores.sql)
            self.sg.deployment = name
        self.sg.spool = self.spool
        self.queries: list[StreamingQuery] = []
        # With --until-idle every query ends once it has consumed the input, so they need not all
        # run at once: a few at a time, so that the Python workers they start (parsing, TUPLE and
        # BATCH state) do not starve each other on a small machine (a worker that cannot connect
        # back to the JVM within its timeout fails the query).
        self.max_concurrent = settings.current().max_queries or max(2, spark.sparkContext.defaultParallelism)
        self._pending: list[tuple[DataFrame, str, Writer]] = []
        self._launched: dict[str, tuple[DataFrame, str, Writer]] = {}  # query name -> how it started
        self._restarts: Counter[str] = Counter()  # query name -> restarts after a transient failure
        # rows the writers wrote (they run in this process); "applied": rows stored into tables
        self.written = {"out": 0, "dead": 0, "applied": 0}
        self.tally = progress.Tally(name)
        self.on_started = on_started  # told each query's name once it has started (checkpoint.py)
        self._stopping = threading.Event()  # set by stop_between_batches: no writer begins a batch
        self._gates: list[Gate] = []  # the queries' foreachBatch functions, released by stop
        self._written: set[str] = set()  # failure points a sink's or table's query writes (`_along`)

    # ---- starting the queries ------------------------------------------------------------------

    def _start(self, df: DataFrame, name: str, writer: Writer) -> None:
        writer = self.spool.writer(writer, name, self.dead_dir, self._count("dead"))  # its tasks' too
        self._pending.append((df, name, writer))
        self._launch()

    def _launch(self) -> None:
        while self._pending and (
            not self.until_idle or sum(1 for q in self.queries if q.isActive) < self.max_concurrent
        ):
            df, name, writer = self._pending.pop(0)
            self._launched[spark_name(self.name, name)] = (df, name, writer)
            w = df.writeStream.queryName(spark_name(self.name, name)).foreachBatch(self._gated(writer))
            w = w.option("checkpointLocation", str(self.checkpoint / query_dir(name)))
            w = w.trigger(availableNow=True) if self.until_idle else w.trigger(processingTime="0 seconds")
            drop_interrupted_log_writes(self.checkpoint / query_dir(name))
            self.spool.clear(name)  # what an earlier start of the query left
            self.queries.append(self._started(w, name, df))
            if self.on_started is not None:
                self.on_started(name)

    def _started(self, w: Any, name: str, df: DataFrame) -> StreamingQuery:
        """`w`, the query of `df`, started with its settings (starting.query_settings)."""
        planned = next((q for q in self.plan if q.name == name), None)
        wanted = query_settings(self.graph, planned, df, shuffle_partitions(self.spark), name)
        return started_with(w, self.spark.conf, wanted)

    def _gated(self, writer: Writer) -> Gate:
        """`writer`, unless the run is stopping (deployer.spark.run.gate). A batch the stop
        interrupts while it writes fails in a few lines (deployer.spark.run.interrupt)."""
        gate = Gate(writer, self._stopping)
        self._gates.append(gate)
        return gate

    def _sink_writer(self, stream: str, uri: str) -> DriverSink:
        consoles = sum(1 for u in self.sinks.values() if u == "console")
        return sink_writer(self.graph, stream, uri, consoles > 1, self._counted("out", stream))

    def start(self) -> None:
        """Translate the graph and start the queries of `self.plan`, in its order."""
        dead_letter_owners.write(self.checkpoint, owners_of(self.plan))  # before any of them starts
        by_name = {q.name: q for q in self.plan}
        for query in self.plan:
            if is_shared(query.name):
                self._start_shared(query)
            elif query.name.startswith("sink:"):
                stream = query.writes[0]
                writer = self._sink_writer(stream, self.sinks[stream])
                self._start(*self._along(query, self.graph.streams[stream], writer))
            elif query.name.startswith("table:"):
                self._start_table(query)
            elif query.name.startswith(PREFIX):
                writers = {s: self._sink_writer(s, self.sinks[s]) for s in query.writes if s in self.sinks}
                frame, write, written = pattern_query(self.sg, query, writers, self._dead)
                shared_record.write(self.checkpoint, query.name, writers)  # before Spark's first offsets
                self._written |= written
                self._start(frame, query.name, write)
        for node in self.graph.nodes:
            if isinstance(node, g.UpdateSQL):
                # An UpdateSQL's statements are effects of their own: they run whether or not its
                # output reaches a sink or a table, as in the reference executor. Translating it
                # gives it a failure point: written by the sink or table that writes its rows, or
                # else a query of its own (below), which executes it for every event.
                self.sg.port(g.Port(node.id))
        self._start_dead_letters(by_name)

    def _start_shared(self, query: Query) -> None:
        """A query of sinks that need no state: it reads each input once (deployer.spark.run.shared)."""
        together = [w for w in query.writes if w in self.sinks]
        inputs = shared_inputs(self.graph, together)
        writers = {stream: self._sink_writer(stream, self.sinks[stream]) for stream in together}
        plan = plans_of(self.sg, spool=self.spool)
        split = driver_splits(self.graph, query.name, query.writes, query.on_driver, self._dead)
        write = shared_writer(self.graph, inputs, writers, plan, self.tally.reporter(query.name), split)
        shared_record.write(self.checkpoint, query.name, writers)  # before Spark's first offsets
        self._start(stem(self.sg.sources, inputs), query.name, write)
        for stream in together:
            self.sg.port(self.graph.streams[stream])  # translated all the same, for its dead letters

    def _start_table(self, query: Query) -> None:
        node = next(
            n for n in self.graph.nodes if isinstance(n, g.Materialize) and query.writes[0] == n.table.name
        )
        shape, order = table_shape(self.sg, node)
        refused = DeadLetterWriter(
            self.dead_dir,
            f"table-{node.table.name}",
            {"stage": "Materialize", "node": node.id, "line": node.line},
            counted=self._count("dead"),
        )
        applied = self._counted("applied", query.name)
        write = materialize_writer(self.sg, node, refused, applied=applied, order=order)
        self._start(*self._along(query, node.inputs[0], TableOutput(shape, write)))

    def _along(
        self, query: Query, port: g.Port, output: Writer | TableOutput
    ) -> tuple[DataFrame, str, Writer]:
        """What `query` runs and how it writes: the rows of `port` (a table's shape selected), or, where
        it writes failures too, those before their split (failures.py `along`, `stateless_on_driver`)."""
        assigned = set(query.along)
        if assigned:
            frame, write, written = along(self.sg, port, assigned, self._dead, output)
            self._written |= written
        elif query.on_driver:
            label = query.on_driver[0]
            frame, write = stateless_on_driver(self.sg, port, label, output, self._dead(label))
        elif isinstance(output, TableOutput):
            frame, write = self.sg.port(port).select(*output.shape), output.write
        else:
            frame, write = self.sg.port(port), output
        return frame, query.name, write

    def _start_dead_letters(self, planned: Mapping[str, Any]) -> None:
        """The queries that write failures only (deployer.spark.run.failures): one per failure point that
        no sink or table writes, and the dead-letters query."""
        own = failure_queries(self.sg, self._written)
        shared = dead_letters(self.sg, self.inputs, self._dead("stateless"), self.spool.labels)
        expected = {n for n in planned if n.startswith("failed:")}
        if set(own) != expected or (shared is not None) != (DEAD_LETTERS in planned):
            raise AssertionError(
                f"the translation's failure points {sorted(own)} (shared: {shared is not None}) differ "
                f"from the query plan's {sorted(expected)} (shared: {DEAD_LETTERS in planned})"
            )
        for name in (n for n in planned if n in own):
            self._start(own[name], name, self._dead(name))
        if shared is not None:
            self._start(shared[0], DEAD_LETTERS, shared[1])

    def _dead(self, name: str) -> DeadLetterWriter:
        """The writer of the dead letters of failure point `name` (`failed:<node>`, or "stateless")."""
        return DeadLetterWriter(self.dead_dir, name.removeprefix("failed:"), counted=self._count("dead"))

    def _counted(self, what: str, output: str) -> Callable[[int, int], None]:
        """Told each batch's rows a sink wrote ("out") or a table stored ("applied"), with its id."""
        return lambda n, _batch: self._count(what)(n)

    def _count(self, what: str) -> Callable[[int], None]:
        def add(n: int) -> None:
            self.written[what] += n

        return add

    # ---- running -------------------------------------------------------------------------------

    def run(
        self, progress_every: float = 5.0, out: Any = sys.stderr, stop: threading.Event | None = None
    ) -> SparkRunStats:
        """Run the queries until they have consumed their input (until_idle) or `stop` is set: then
        each query is stopped between two micro-batches (see `stop_between_batches`). Progress goes
        to `out` (deployer.spark.run.reporter)."""
        if stop is None or not stop.is_set():
            self.start()
        reporter = Reporter(out, len(self.plan) if self.until_idle else None, progress_every)
        if ui := self.spark.sparkContext.uiWebUrl:
            reporter.say(f"spark UI: {ui}")
        try:
            stopped = self._drive(reporter, progress_every, stop)
        finally:
            reporter.close()
            self.stop()
        self.tally.absorb(self.queries)
        stats = SparkRunStats(
            queries=[q.name for q in self.queries],
            rows_out=self.written["out"],
            dead_lettered=self.written["dead"],
            stopped=stopped,
            applied=self.written["applied"],
        )
        return self.tally.totals(stats, filters_counted())

    def _drive(self, reporter: Reporter, absorb_every: float, stop: threading.Event | None) -> bool:
        """Wait for the queries to end, starting the pending ones, reporting progress; True if `stop`
        ended the run. A query's failure is raised as QueryFailed."""
        last = time.monotonic()
        while ((active := [q.isActive for q in self.queries]) and any(active)) or self._pending:
            if stop is not None and stop.is_set():
                # Checked before failures: a stop from a terminal's Ctrl-C reaches Spark's Python
                # workers too, and a batch it breaks is not a failure of the run (the batch stays
                # in the checkpoint and is replayed on restart).
                reporter.say("stopping: letting the micro-batches in progress finish")
                self.stop_between_batches()
                return True
            looked = list(zip(self.queries, active, strict=False))  # before `_launch` adds to them
            self._raise_failures(reporter, [q for q, on in looked if not on])
            self._launch()
            progress.wait_for_end(next((q for q, on in looked if on), None), 0.1)
            if time.monotonic() - last >= absorb_every:
                last = time.monotonic()
                self.tally.absorb(self.queries)
            reporter.update(active.count(False), self.progress_text)
        self._raise_failures(reporter)
        if self._pending:  # a query started again after its last check
            return self._drive(reporter, absorb_every, stop)
        return False

    def _raise_failures(self, reporter: Reporter, ended: list[StreamingQuery] | None = None) -> None:
        """Raise the first query's failure; a transient one (progress.is_transient) starts the query
        again from its checkpoint instead, which replays its unfinished batch, a few times.
        `ended`: the queries to look at (a running one has no failure to ask for), else all."""
        for q in list(self.queries if ended is None else ended):
            exc = q.exception()
            if exc is None:
                continue
            if (
                progress.is_transient(str(exc))
                and self._restarts[q.name] < progress.RESTARTS
                and not self._stopping.is_set()
            ):
                # Spark sets a query's exception, then stops its sources, then lets go of its name:
                # the same name started in between is refused ("already active"). It has let go
                # once the query's termination is signalled (awaitTermination raises `exc` then).
                with contextlib.suppress(Exception):
                    q.awaitTermination(120)
                self._restarts[q.name] += 1
                self.tally.absorb([q])
                self.queries.remove(q)
                self._pending.insert(0, self._launched[q.name])
                reporter.say(f"query {q.name}: {progress.root_cause(str(exc))}; starting it again")
                continue
            raise self._failed(q.name, exc)

    def absorb_progress(self) -> None:
        """Take the counts of the batches each query has reported since the last call."""
        self.tally.absorb(self.queries)

    def _failed(self, query: str, exc: Any) -> QueryFailed:
        resume = (
            "; its unfinished batch is kept in the checkpoint: run the same command again to resume"
            if self._tmp is None
            else ""
        )
        err = QueryFailed(f"query {query} failed: {progress.root_cause(str(exc))}{resume}", str(exc))
        err.__cause__ = RuntimeError(str(exc))  # the whole of it, under `cep --debug`
        return err

    def progress_text(self) -> str:
        """Where each query is, and what the read caches did (deployer.spark.run.reporter)."""
        return progress_text(self.queries, self.sg.cache_counters)

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
        set_log_level(self.spark, "OFF")
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
            set_log_level(self.spark, settings.current().spark_log_level)
            py4j.setLevel(level)

    def stop(self) -> None:
        for q in self.queries:
            try:
                if q.isActive:
                    q.stop()
            except Exception:  # a query stopping during shutdown may raise; it is stopped either way
                pass
        try:
            ended = not any(q.isActive for q in self.queries)  # their threads too: no more calls
        except Exception:  # the JVM going away
            ended = False
        # else py4j and the JVM keep each other's half of the deployment; and Python a thread per query
        callers = [c for gate in self._gates for c in gate.release()]
        stopped = self.queries if ended else []  # a query still running keeps what it uses
        give_back(self.spark, callers if ended else (), stopped)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
