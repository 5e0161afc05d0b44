"""The vocabulary of the Spark translation, shared by every operator's handler.

Every port of the operator graph becomes a streaming DataFrame whose columns are named by position
(`_0`, `_1`, ...; `deployer.spark.translate.expr.col_name`), plus `__seq`, the row's place in the order the
reference executor processes rows (`SEQ`). `SparkGraph` translates a port on first use by calling
the handler of its producer (the table is `deployer.spark.handlers.HANDLERS`, passed in); handlers
split the rows whose expressions fail off into `DeadLetter` frames (`SparkGraph.split_errors`), as
the reference executor dead-letters those events. This module also holds what several handlers
build: projections, the order key of event time, the count of the events a WHERE drops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer import settings
from deployer.spark.metrics import FILTERED_METRIC
from deployer.spark.translate.columns import Message, col_name, error_column, spark_type, where_failed
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.failed_rows import failed_conditions
from operators import expr as ir
from operators import graph as g
from operators.analysis import live_fields, stateless_upstream
from operators.datatypes import Schema
from stores.bindings import StoreBindings

ERR = "__err"  # the per-row error column while it exists
# A failed row's event, beside ERR, in a frame whose micro-batches a query splits on the driver
# (deployer.spark.run.failures): a name of its own, apart from the pattern processor's output column
# `__failed_event` (patterns/processor.py), which a pattern's split on the driver would have
# overwritten (tried: docs/architecture.md).
SPLIT_EVENT = "__split_event"
_T = TypeVar("_T")

# Every row carries its arrival position: a string that sorts in arrival order and is the same when
# a batch is replayed (it derives from the source position). Per-key ordered state sorts by it, and
# it identifies an event for exactly-once side effects.
SEQ = "__seq"

Handler = Callable[["SparkGraph", g.Node], None]


@dataclass(frozen=True)
class DeadLetter:
    """Rows that failed in node `node` (script line `line`) of operator `stage` ("Map", ...): a
    DataFrame of `reason` and `event`, a struct of the failed event's values (as the reference
    executor's dead letters carry them); `stream` names the source stream for a Source node."""

    node: str
    line: int
    df: DataFrame | None  # None when `spooled`
    stage: str = "operator"
    stream: str | None = None
    # Computed from its sources by stateless operators only: it can share a query with the other
    # such dead letters (`deployer.spark.run.deployment`), where re-running stateful operators or data store
    # calls in another query would cost state, or repeat side effects.
    stateless: bool = False
    # A split whose rows go on through stateless steps only (`SparkGraph.split_errors`'s `then`):
    # the query that writes its rows (the node's port) can write its failures too, from one
    # computation: it runs `whole` (the rows before the split, with the error column) and splits each
    # micro-batch with `failed` and `kept` (deployer.spark.run.failures). None otherwise.
    split: Split | None = None
    # Written by the tasks of the query that computes its rows (`SparkGraph.spool`), under this
    # label; there is then no `df`.
    spooled: str | None = None
    # An Observation of its failed rows, made where its rows and its failures split, when the graph
    # `counts_failures` (a micro-batch's graph in deployer.spark.run.failures.along): the job that
    # computes the rows counts them, so its dead letters need no job unless there are some.
    failures: Observation | None = None

    def frame(self) -> DataFrame:
        """`df`, which a failure point whose tasks write its dead letters has not."""
        assert self.df is not None, f"the failures of {self.node} are written by its tasks"
        return self.df


@dataclass(frozen=True)
class Split:
    """One failure point's frame before the split, and how a batch of it splits."""

    whole: DataFrame
    failed: Callable[[DataFrame], DataFrame]  # `whole`'s failed rows as `reason` and `event`
    kept: Callable[[DataFrame], DataFrame]  # its other rows, without the error column, made the port's
    event: Column  # a failed row's `event`, over `whole`'s columns
    # The columns the step after the split drops, when that is all it does (a data store call's
    # error column): `whole`'s rows without them are the port's, every row kept, so a micro-batch
    # of `whole` can be split on the driver (deployer.spark.run.failures). None when the step does
    # more (a window's HAVING and SELECT).
    drops: tuple[str, ...] | None = None

    def through(self, rows: DataFrame) -> DataFrame:
        """`rows` (of `whole`'s shape) made the port's by dropping `drops`: every row kept."""
        assert self.drops is not None, "the step after this split does more than drop columns"
        return _dropping(self.drops)(rows)


@dataclass
class SparkGraph:
    """The translated graph: a DataFrame per port, and the dead-letter DataFrames found on the way."""

    graph: g.Graph
    sources: dict[str, DataFrame]  # stream name → typed streaming DataFrame (positional columns)
    # The translation of each operator (deployer.spark.handlers.HANDLERS): passed in, so that the
    # handlers can use this module's vocabulary without it importing them back.
    handlers: Mapping[type[g.Node], Handler]
    # for the ReadSQL/UpdateSQL executors (deployer.spark.datastores.sql)
    stores_config: StoreBindings | None = None
    ports: dict[g.Port, DataFrame] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    # Source streams whose frames already dead-lettered the events without event time
    # (`deployer.spark.streams.sinks.file_source` does, in the query that writes its rejected records).
    timed_sources: set[str] = field(default_factory=set)
    # The deployment this graph runs as; it scopes exactly-once ledger entries (deployer.spark.datastores.sql).
    deployment: str | None = None
    # Per cached SQLQUERY: Spark accumulators of its read cache's hits, misses and store loads,
    # added to by the executors (deployer.spark.datastores.sql.read_sql), read by the progress line.
    cache_counters: dict[str, tuple[Any, Any, Any]] = field(default_factory=dict)
    _live: dict[g.Port, frozenset[int] | None] | None = field(default=None, repr=False)
    # Set on the batch graph of a query's micro-batch (deployer.spark.run.shared): Filters count what they
    # drop in these pyspark Observations, by node id, as a batch DataFrame reports no progress.
    observations: dict[str, Any] | None = None
    # Shared by the batch graphs of one query's micro-batches (deployer.spark.run.shared): the Columns
    # the handlers compiled, by (node id, what). Each Column is built in the JVM over py4j, one call
    # per function or operator, and a batch graph would build them all again for every micro-batch
    # (most of its planning time, in an ad-hoc profile); a Column names its inputs: it fits any batch.
    memo: dict[tuple[str, str], Any] | None = None
    # Whether failures become DeadLetter frames. The batch graphs of the shared query only drop the
    # failed rows: the streaming graph's dead-letter query writes them (deployer.spark.run.deployment).
    collect_dead_letters: bool = True
    # The failure points whose dead letters the tasks that find them write (deployer.spark.streams.
    # spool.Spool, which the deployment passes in: its `labels`, and a call that makes a frame's
    # split so); None: each is a DeadLetter frame for a query to write.
    spool: Any = None
    # Whether each DeadLetter frame comes with an Observation of its failed rows (`failures`).
    counts_failures: bool = False
    # Columns a Map passes on as they are: a failure split's error column and failed events, over
    # the Maps after a split that a query's foreachBatch splits on the driver (deployer.spark.run.
    # failures).
    carried: tuple[str, ...] = ()
    # The stateless operators (node ids) whose rows a query splits on the driver (deployer.spark.
    # run.failures `stateless_on_driver`): `split_errors` keeps every row, with ERR and SPLIT_EVENT.
    marked: frozenset[str] = frozenset()

    def compiled(self, node: g.Node, what: str, build: Callable[[], _T]) -> _T:
        """`build()`, once per node and `what` when the graph has a `memo`."""
        if self.memo is None:
            return build()
        key = (node.id, what)
        if key not in self.memo:
            self.memo[key] = build()
        return self.memo[key]

    def marking(self, node_id: str, memo: dict[tuple[str, str], Any]) -> SparkGraph:
        """A graph over this one's frames in which the Map or Filter `node_id` keeps every row, with
        its error and failed event beside it (`marked`), and the steps after it carry them on, for a
        query that splits its collected rows on the driver (deployer.spark.run.driver_split). Its
        Filters count what they drop where this graph's do."""
        node = self.graph.node(node_id)
        over = SparkGraph(
            self.graph, {}, self.handlers, self.stores_config, memo=memo, carried=(ERR, SPLIT_EVENT)
        )
        over.marked, over.observations = frozenset({node_id}), self.observations
        over.ports[node.inputs[0]] = self.port(node.inputs[0])
        return over

    def live(self, port: g.Port) -> frozenset[int] | None:
        """The fields of `port` some consumer reads; None when all may be (operators.analysis)."""
        if self._live is None:
            self._live = live_fields(self.graph)
        return self._live.get(port)

    def port(self, port: g.Port) -> DataFrame:
        if port not in self.ports:
            node = self.graph.node(port.node)
            self.handlers[type(node)](self, node)
        return self.ports[port]

    def input(self, node: g.Node, i: int = 0) -> DataFrame:
        return self.port(node.inputs[i])

    def event_time_index(self, port: g.Port) -> int | None:
        producer = self.graph.node(port.node)
        if producer.event_time is None:
            return None
        return producer.schema.position(producer.event_time)

    def split_errors(
        self,
        node: g.Node,
        df: DataFrame,
        errors: list[tuple[Column, Message]],
        width: int | list[Column],
        *,
        on_input: bool = False,
        then: Callable[[DataFrame], DataFrame] | None = None,
        event: Column | None = None,
        drops: tuple[str, ...] = (),
    ) -> DataFrame:
        """Route rows with an error to a dead letter; return the others without the error column.
        The dead letter's event is the first `width` columns (`_0`, `_1`, ...), or the given ones.
        `on_input`: the rows are the node's input (an Aggregate's events), not its results. `then`:
        the stateless steps (filters, projections) that make the other rows the node's port, applied
        here; given where the handler makes its port so, for a split after a stateful operator or a
        data store call: the query writing the port can then write the failures too (`Split`).
        `drops`: instead of `then`, the columns the step after the split drops, when that is all it
        does (a data store call's error column): the `Split` can then be made on the driver
        (`Split.drops`). `event`: the dead letter's event already encoded (`columns.encoded_event`),
        for rows not all events of one shape (a window's rows beside the events its state refused)."""
        if drops:
            assert then is None, "a split step either drops columns or is given as `then`"
            then = _dropping(drops)
        if not errors:
            return _then(then, df)
        stateless = self._stateless(node, on_input)
        label = self._spooled(node, stateless)
        if not self.collect_dead_letters and label is None:
            return _then(then, df.filter(self._ok(node, on_input, errors)))
        err = error_column(errors)
        assert err is not None
        fields = [F.col(col_name(i)) for i in range(width)] if isinstance(width, int) else width
        payload = event if event is not None else F.struct(*[f.alias(f"_{i}") for i, f in enumerate(fields)])

        def failed(whole: DataFrame) -> DataFrame:
            return whole.filter(F.col(ERR).isNotNull()).select(
                F.col(ERR).alias("reason"), payload.alias("event")
            )

        def kept(whole: DataFrame) -> DataFrame:
            return _then(then, whole.filter(F.col(ERR).isNull()).drop(ERR))

        if node.id in self.marked:
            return _then(then, _marked(df, err, payload))
        stream = node.stream if isinstance(node, g.Source) else None
        if label is not None:
            where = self._spooling(node, stateless, label)
            return _then(then, self.spool(label, df.withColumn(ERR, err), ERR, payload, where))
        ok = self._ok(node, on_input, errors)
        df, failures = self._counted(node, on_input, df, ok)
        rows = _then(then, df.filter(ok))
        df = df.withColumn(ERR, err)  # `whole`: the failed rows are those with a message
        split = (
            Split(df, failed, kept, payload, drops or None) if then is not None and not stateless else None
        )
        self.dead_letters.append(
            DeadLetter(node.id, node.line, failed(df), node.op, stream, stateless, split, failures=failures)
        )
        return rows

    def _ok(self, node: g.Node, on_input: bool, errors: list[tuple[Column, Message]]) -> Column:
        """Whether a row of `split_errors` goes on: no condition holds for it, not no message (docs/
        architecture.md, "The rows that go on past a failure point"), built once per node where used."""
        return self.compiled(node, f"ok:{on_input}", lambda: ~any_of(failed_conditions(errors)))

    def _counted(
        self, node: g.Node, on_input: bool, df: DataFrame, ok: Column
    ) -> tuple[DataFrame, Observation | None]:
        """`df` with an Observation of its failed rows (not `ok`), when the graph `counts_failures`."""
        if not self.counts_failures:
            return df, None
        failures = Observation()
        counted = self.compiled(
            node, f"failures:{on_input}", lambda: F.count(F.when(~ok, F.lit(1))).alias("rows")
        )
        return df.observe(failures, counted), failures

    def spooled_in_stage(self, node: g.Node, err: str, width: int) -> Any:
        """How the Python stage that finds `node`'s failures (a data store call's: the reason in the
        column `err`, the event in the first `width` columns) spools them itself, when its query's
        tasks write them: registered as `split_errors` registers a spooled failure point, so that
        no spooling stage follows: a `streams.task_spool.InStage` (typed as `spool` is: the
        translation does not import the streams). None when they go another way: then call
        `split_errors`."""
        label = self._spooled(node, stateless := self._stateless(node, False))
        if label is None or node.id in self.marked:
            return None
        where = self._spooling(node, stateless, label)
        return self.spool.in_stage(label, err, tuple(col_name(i) for i in range(width)), where)

    def _spooling(self, node: g.Node, stateless: bool, label: str) -> dict[str, Any]:
        """`node`'s failure point `label` registered as its query's tasks spool it; `where_failed`."""
        where = where_failed(node)
        dl = DeadLetter(node.id, node.line, None, node.op, where["stream"], stateless, spooled=label)
        self.dead_letters.append(dl)
        return where

    def _stateless(self, node: g.Node, on_input: bool) -> bool:
        """operators.analysis.stateless_upstream, once per node: the shared query's batch plans
        split every micro-batch (`memo`)."""
        return self.compiled(
            node, f"stateless:{on_input}", lambda: stateless_upstream(self.graph, node, on_input)
        )

    def _spooled(self, node: g.Node, stateless: bool) -> str | None:
        """The label of the failure point `split_errors` is making, if its tasks write its dead
        letters (`spool`): numbered as deployer.spark.run.queries.failed_query names the node's
        failure points that are not stateless, in the order the translation meets them; a stateless
        operator's (it has one at most), `stateless-<node>`."""
        if self.spool is None:
            return None
        if stateless:
            label = f"stateless-{node.id}"
            return label if label in self.spool.labels else None
        k = 1 + sum(1 for d in self.dead_letters if d.node == node.id and not d.stateless)
        label = node.id if k == 1 else f"{node.id}-{k}"
        return label if label in self.spool.labels else None


def _then(then: Callable[[DataFrame], DataFrame] | None, rows: DataFrame) -> DataFrame:
    """`rows` through SparkGraph.split_errors's `then`, if it has one."""
    return rows if then is None else then(rows)


def _marked(df: DataFrame, err: Column, payload: Column) -> DataFrame:
    """Every row of `df` with its error (NULL unless it failed) and its failed event beside it, for a
    query that splits them on the driver (SparkGraph.marked)."""
    return with_failed_event(df.withColumn(ERR, err), payload)


def with_failed_event(df: DataFrame, payload: Column) -> DataFrame:
    """`df`, whose rows have their error in ERR, with the failed rows' event (`payload`) in SPLIT_EVENT:
    what a query that splits them on the driver makes dead letters of (a stateless step's, `_marked`;
    a data store call's, deployer.spark.run.failures)."""
    kind = df.select(payload).schema[0].dataType  # its fields nullable: Arrow refuses a non-nullable
    if isinstance(kind, T.StructType):  # one (a constant's) under the NULL of a row that did not fail
        payload = payload.cast(T.StructType([T.StructField(f.name, f.dataType) for f in kind.fields]))
    return df.withColumn(SPLIT_EVENT, F.when(F.col(ERR).isNotNull(), payload))


def _dropping(columns: tuple[str, ...]) -> Callable[[DataFrame], DataFrame]:
    """The step after a split that only drops `columns` (SparkGraph.split_errors's `drops`)."""
    return lambda kept: kept.drop(*columns)


def any_of(conds: Iterable[Column]) -> Column:
    """Whether any of `conds` (never NULL: see ExprCompiler._error) holds."""
    out: Column | None = None
    for cond in conds:
        out = cond if out is None else out | cond
    return F.lit(False) if out is None else out


def project(
    c: ExprCompiler, items: tuple[g.NamedExpr, ...], prefix: str = "_", timed: str | None = None
) -> list[Column]:
    """Compile projections. A field passed through is not cast: a cast would hide the event-time
    column from Spark's watermark tracking.

    Only the output's event-time field (`timed`) may carry the watermark's mark: a copy of the
    event time under another name (`SELECT ts, ts AS t2`) would keep it too (an alias keeps a
    column's metadata), and a join or window over the output would then fail with
    MULTIPLE_EVENT_TIME_COLUMNS (found by the fuzzer). A timestamp computed from the column
    carries none."""
    cols = []
    for i, p in enumerate(items):
        value = c.compile(p.expr)
        if not isinstance(p.expr, ir.Col):
            value = value.cast(spark_type(p.expr.type))
        elif p.expr.type.kind == "timestamp" and p.name != timed:
            value = unmarked(value)
        cols.append(value.alias(f"{prefix}{i}"))
    return cols


def unmarked(ts: Column) -> Column:
    """A timestamp column without the watermark's mark (its value unchanged)."""
    return F.timestamp_micros(F.unix_micros(ts))


# Name prefix of the observed metric (Dataset.observe) counting the events a Filter or MultiFilter
# drops, `cep_filtered:<node id>`: reported in the progress of every query that runs the node, and
# summed by deployer.spark.run.deployment for the run's summary (docs/guarantees.md, "Counting events").


def filters_counted() -> bool:
    """Whether Filters and MultiFilters count the events they drop: yes unless CEP_COUNT_FILTERED=0.

    An observation costs no Spark action, but it ends the operator's whole-stage generated code:
    on a plan that does nothing else (bench/run, "stateless") it took the throughput from
    1.04x to 0.78x of the hand-written job. A run that does not need the balance of its counts can turn it off."""
    return settings.current().count_filtered


def count_filtered(sg: SparkGraph, node: g.Node, df: DataFrame, kept: Column) -> DataFrame:
    """`df` with an observation of its rows for which `kept` is not TRUE (see `filters_counted`).
    An observation is aggregated while the batch runs, so counting costs no Spark action of its own."""
    if not filters_counted():
        return df
    dropped = sg.compiled(
        node, "dropped", lambda: F.count(F.when(~F.coalesce(kept, F.lit(False)), F.lit(1))).alias("rows")
    )
    if sg.observations is not None:
        obs = sg.observations[node.id] = Observation(f"{FILTERED_METRIC}{node.id}")
        return df.observe(obs, dropped)
    return df.observe(f"{FILTERED_METRIC}{node.id}", dropped)


# Event time as a fixed-width decimal string sorts like the time itself (pre-1970 included).
ORDER_OFFSET = 10**18  # order_key: µs + this, as 20 digits


def order_key(ts: Column) -> Column:
    """A string that sorts like the timestamp `ts`, to build keys that sort by time first."""
    return F.lpad((F.unix_micros(ts) + F.lit(ORDER_OFFSET)).cast("string"), 20, "0")


def named(df: DataFrame, schema: Schema, *extra: str) -> DataFrame:
    """Give positional columns their real names, for results leaving the engine (followed by the
    `extra` columns, when given)."""
    return df.select(*named_columns(schema), *extra)


def named_columns(schema: Schema) -> list[Column]:
    """The columns `named` selects, to be made once where they name every micro-batch of a query."""
    return [F.col(col_name(i)).alias(f.name) for i, f in enumerate(schema)]
