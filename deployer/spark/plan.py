"""Operator graph → Spark Structured Streaming DataFrames, one handler per operator.

Every port of the graph becomes a streaming DataFrame whose columns are named by position (`_0`,
`_1`, ...; see `deployer.spark.expr`). Stateless operators and TIME-window aggregates and joins are
native Spark (DESIGN.md decision 3); TUPLE and BATCH windows use per-key ordered state
(`deployer.spark.window_state`); ReadSQL/UpdateSQL run in Arrow batches against the stores
(`deployer.spark.sql`). Terminal nodes (Sink, Materialize) are turned into streaming queries by
`deployer.spark.deployment`. The reference executor (`deployer.local.executor`) defines what each operator
means; tests/spark compares the two on the same input.

Rows that fail an expression (division by zero, a bad CAST, integer overflow) are split off into
dead-letter DataFrames with the reason and the event, as the reference executor does.

Order. Every row carries `__seq`, a string that sorts in the order the reference executor
processes rows: arrival position for source events (file, then line), prefixed by the input's
index after a Union (the reference breaks event-time ties input by input), the completing event's
(event time, arrival) for TUPLE/BATCH results, (window end, first event) for TIME results. Sinks
write each micro-batch sorted by event time, then `__seq`.

Watermarks and time. The watermark is declared at the input of each stateful operator, as max
event time less the largest WATERMARK of the sources behind it (after a Union: of all of them),
except after a Join, whose output carries the watermark Spark propagates. A TIME window fires when
that watermark reaches its end, so at the end of a bounded input it fires iff max event time -
WATERMARK >= end, the reference executor's rule. Known differences, by design:

- Late events (behind the watermark on arrival) are dead-lettered by the reference executor at
  the source; Spark drops them only in stateful operators (a TIME window drops an event when all
  its windows have closed), and stateless outputs keep them. Spark judges lateness against the
  watermark of the batch before the previous one, so an event late by one batch still joins a
  window that is being emitted in its batch.
- The watermark is declared at a stateful operator's input, after the filters and the expressions
  that can fail before it (Spark even pushes an aggregate's own failure filter below it): events
  dropped or dead-lettered on the way do not move it; the reference's per-source watermark counts
  every event read.
- Sources with different WATERMARK delays merged by a Union: Spark uses the largest delay for the
  merged stream, the reference each source's own, so Spark may close windows later (and at the
  end of the input, fire fewer).
- A TIME window over a Join's output: at the end of the input the reference closes windows up to
  the later of the join inputs' final times, Spark up to the earlier one less the join's bound.
- Out-of-order input across micro-batches for TUPLE/BATCH windows (see `deployer.spark.window_state`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deployer import settings
from deployer.spark.expr import ExprCompiler, Message, col_name, error_column, spark_type
from deployer.spark.live import live_fields
from operators import expr as ir
from operators import graph as g
from stores.bindings import StoreBindings

ERR = "__err"  # the per-row error column while it exists
_T = TypeVar("_T")

# Every row carries its arrival position: a string that sorts in arrival order and is the same when
# a batch is replayed (it derives from the source position). Per-key ordered state sorts by it, and
# it identifies an event for exactly-once side effects.
SEQ = "__seq"


@dataclass(frozen=True)
class DeadLetter:
    """Rows that failed in node `node` (script line `line`) of operator `stage` ("Map", ...): a
    DataFrame of `reason` and `event`, a struct of the failed event's values (as the reference
    executor's dead letters carry them); `stream` names the source stream for a Source node."""

    node: str
    line: int
    df: DataFrame
    stage: str = "operator"
    stream: str | None = None
    # Computed from its sources by stateless operators only: it can share a query with the other
    # such dead letters (`deployer.spark.deployment`), where re-running stateful operators or data store
    # calls in another query would cost state, or repeat side effects.
    stateless: bool = False


@dataclass
class SparkGraph:
    """The translated graph: a DataFrame per port, and the dead-letter DataFrames found on the way."""

    graph: g.Graph
    sources: dict[str, DataFrame]  # stream name → typed streaming DataFrame (positional columns)
    stores_config: StoreBindings | None = None  # for the ReadSQL/UpdateSQL executors (deployer.spark.sql)
    ports: dict[g.Port, DataFrame] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    # Source streams whose frames already dead-lettered the events without event time
    # (`deployer.spark.sinks.file_source` does, in the query that writes its rejected records).
    timed_sources: set[str] = field(default_factory=set)
    # The deployment this graph runs as; it scopes exactly-once ledger entries (deployer.spark.sql).
    deployment: str | None = None
    # Per cached SQLQUERY: Spark accumulators of its read cache's hits, misses and store loads,
    # added to by the executors (deployer.spark.sql.read_sql), read by the progress line.
    cache_counters: dict[str, tuple[Any, Any, Any]] = field(default_factory=dict)
    _live: dict[g.Port, frozenset[int] | None] | None = field(default=None, repr=False)
    # Set on the batch graph of a query's micro-batch (deployer.spark.shared): Filters count what they
    # drop in these pyspark Observations, by node id, as a batch DataFrame reports no progress.
    observations: dict[str, Any] | None = None
    # Shared by the batch graphs of one query's micro-batches (deployer.spark.shared): the Columns
    # the handlers compiled, by (node id, what). Each Column is built in the JVM over py4j, one call
    # per function or operator, and a batch graph would build them all again for every micro-batch
    # (most of its planning time, in an ad-hoc profile); a Column names its inputs: it fits any batch.
    memo: dict[tuple[str, str], Any] | None = None
    # Whether failures become DeadLetter frames. The batch graphs of the shared query only drop the
    # failed rows: the streaming graph's dead-letter query writes them (deployer.spark.deployment).
    collect_dead_letters: bool = True

    def compiled(self, node: g.Node, what: str, build: Callable[[], _T]) -> _T:
        """`build()`, once per node and `what` when the graph has a `memo`."""
        if self.memo is None:
            return build()
        key = (node.id, what)
        if key not in self.memo:
            self.memo[key] = build()
        return self.memo[key]

    def live(self, port: g.Port) -> frozenset[int] | None:
        """The fields of `port` some consumer reads; None when all may be (deployer.spark.live)."""
        if self._live is None:
            self._live = live_fields(self.graph, _can_fail)
        return self._live.get(port)

    def port(self, port: g.Port) -> DataFrame:
        if port not in self.ports:
            node = self.graph.node(port.node)
            handler = HANDLERS[type(node)]
            handler(self, node)
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
    ) -> DataFrame:
        """Route rows with an error to a dead letter; return the others without the error column.

        The dead letter's event is the first `width` columns (`_0`, `_1`, ...), or the given ones.
        `on_input`: the rows are the node's input (an Aggregate's events), not its results."""
        if not errors:
            return df
        if not self.collect_dead_letters:
            ok = self.compiled(node, f"ok:{on_input}", lambda: ~_any(cond for cond, _ in errors))
            return df.filter(ok)
        err = error_column(errors)
        assert err is not None
        df = df.withColumn(ERR, err)
        fields = [F.col(col_name(i)) for i in range(width)] if isinstance(width, int) else width
        payload = F.struct(*[f.alias(f"_{i}") for i, f in enumerate(fields)])
        stream = node.stream if isinstance(node, g.Source) else None
        self.dead_letters.append(
            DeadLetter(
                node.id,
                node.line,
                df.filter(F.col(ERR).isNotNull()).select(F.col(ERR).alias("reason"), payload.alias("event")),
                node.op,
                stream,
                stateless_upstream(self.graph, node, on_input),
            )
        )
        return df.filter(F.col(ERR).isNull()).drop(ERR)


def _any(conds: Iterable[Column]) -> Column:
    """Whether any of `conds` (never NULL: see ExprCompiler._error) holds."""
    out: Column | None = None
    for cond in conds:
        out = cond if out is None else out | cond
    return F.lit(False) if out is None else out


def _can_fail(e: ir.Expr) -> bool:
    """Whether `e` may raise for some event: its compiled form records an error condition."""
    c = ExprCompiler()
    c.compile(e)
    return bool(c.errors)


_STATELESS = (g.Source, g.Map, g.Filter, g.MultiFilter, g.Union)


def stateless_upstream(graph: g.Graph, node: g.Node, on_input: bool = False) -> bool:
    """Whether `node` (its inputs, with `on_input`) is computed from the sources by stateless
    operators only: no window, join or data store on the way."""
    todo = [graph.node(p.node) for p in node.inputs] if on_input else [node]
    while todo:
        n = todo.pop()
        if not isinstance(n, _STATELESS):
            return False
        todo.extend(graph.node(p.node) for p in n.inputs)
    return True


Handler = Callable[[SparkGraph, g.Node], None]


def _source(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Source)
    # The watermark is declared where a stateful operator needs it (`watermarked`), not here: Spark
    # allows one definition per lineage, and Python operators (mapInArrow) on the way would hide it.
    df = sg.sources[node.stream]
    if node.event_time is not None and node.stream not in sg.timed_sources:
        # An event without event time cannot be placed in time: the reference dead-letters it.
        ts = col_name(node.schema.position(node.event_time))
        reason = f"event time field '{node.event_time}' is NULL"
        errors: list[tuple[Column, Message]] = sg.compiled(node, "errors", lambda: [(F.col(ts).isNull(), reason)])
        df = sg.split_errors(node, df, errors, len(node.schema))
    sg.ports[g.Port(node.id)] = df


def project(c: ExprCompiler, items: tuple[g.NamedExpr, ...], prefix: str = "_") -> list[Column]:
    """Compile projections. A field passed through is not cast: a cast would hide the event-time
    column from Spark's watermark tracking."""
    cols = []
    for i, p in enumerate(items):
        value = c.compile(p.expr)
        if not isinstance(p.expr, ir.Col):
            value = value.cast(spark_type(p.expr.type))
        cols.append(value.alias(f"{prefix}{i}"))
    return cols


def _map(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Map)
    df = sg.input(node)

    def build() -> tuple[list[Column], list[tuple[Column, Message]]]:
        c = ExprCompiler()
        return [*project(c, node.projections), F.col(SEQ)], c.errors

    cols, errors = sg.compiled(node, "map", build)
    if errors:
        # Evaluate the error conditions against the input row, before projecting it away.
        df = sg.split_errors(node, df, errors, len(node.input_schema))
    sg.ports[g.Port(node.id)] = df.select(*cols)


# Name prefix of the observed metric (Dataset.observe) counting the events a Filter or MultiFilter
# drops, `cep_filtered:<node id>`: reported in the progress of every query that runs the node, and
# summed by deployer.spark.deployment for the run's summary (docs/guarantees.md, "Counting events").
FILTERED_METRIC = "cep_filtered:"


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
        from pyspark.sql import Observation

        obs = sg.observations[node.id] = Observation(f"{FILTERED_METRIC}{node.id}")
        return df.observe(obs, dropped)
    return df.observe(f"{FILTERED_METRIC}{node.id}", dropped)


def _filter(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Filter)

    def build() -> tuple[Column, list[tuple[Column, Message]]]:
        c = ExprCompiler()
        return c.compile(node.predicate), c.errors

    pred, errors = sg.compiled(node, "filter", build)
    df = sg.split_errors(node, sg.input(node), errors, len(node.input_schema))
    # counted after the split: an event that fails the predicate is dead-lettered, not filtered
    sg.ports[g.Port(node.id)] = count_filtered(sg, node, df, pred).filter(pred)


def _multifilter(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.MultiFilter)

    def build() -> tuple[list[Column], list[tuple[Column, Message]], Column]:
        c = ExprCompiler()
        preds = [c.compile(p) for p in node.predicates]
        # filtered: the events that no predicate keeps (as the reference executor counts them)
        kept = _any(F.coalesce(p, F.lit(False)) for p in preds)
        return preds, c.errors, kept

    preds, errors, kept = sg.compiled(node, "multifilter", build)
    df = sg.split_errors(node, sg.input(node), errors, len(node.input_schema))
    df = count_filtered(sg, node, df, kept)
    for i, p in enumerate(preds):
        sg.ports[g.Port(node.id, i)] = df.filter(p)


def _union(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Union)
    frames = []
    for i in range(len(node.inputs)):
        df = sg.input(node, i)
        # Same kinds by construction; cast so that e.g. char(5) and varchar(9) line up exactly.
        given = sg.graph.node(node.inputs[i].node).schema

        def build(i: int = i, given: Any = given) -> list[Column]:
            cols = [
                F.col(col_name(j))
                if given.fields[j].type == f.type
                else F.col(col_name(j)).cast(spark_type(f.type)).alias(col_name(j))
                for j, f in enumerate(node.schema)
            ]
            # Arrival order of a merge: input by input (the reference breaks event-time ties so).
            return [*cols, F.concat(F.lit(f"{i}|"), F.col(SEQ)).alias(SEQ)]

        frames.append(df.select(*sg.compiled(node, f"union:{i}", build)))
    out = frames[0]
    for df in frames[1:]:
        out = out.union(df)
    sg.ports[g.Port(node.id)] = out


def aggregate_column(agg: ir.Agg, c: ExprCompiler) -> Column:
    t = spark_type(agg.type)
    if agg.arg is None:
        return F.count(F.lit(1)).cast(t)
    arg = c.compile(agg.arg)
    fn = {"count": F.count, "sum": F.sum, "avg": F.avg, "min": F.min, "max": F.max}[agg.func]
    if agg.func in ("sum", "avg"):
        arg = arg.cast(t)
    return fn(arg).cast(t)


# Event time as a fixed-width decimal string sorts like the time itself (pre-1970 included).
_ORDER_OFFSET = 10**18


def order_key(ts: Column) -> Column:
    """A string that sorts like the timestamp `ts`, to build keys that sort by time first."""
    return F.lpad((F.unix_micros(ts) + F.lit(_ORDER_OFFSET)).cast("string"), 20, "0")


def finish_aggregate(sg: SparkGraph, node: g.Aggregate, row: DataFrame) -> DataFrame:
    """HAVING and the projections over the aggregated row (columns `_0..` = `node.row_schema`).

    As in the reference executor, an error in HAVING or in a projection dead-letters the row, and
    the projections are only evaluated for rows that HAVING keeps."""
    c = ExprCompiler()
    having = c.compile(node.having) if node.having is not None else None
    if having is not None:
        c.guard = F.coalesce(having, F.lit(False))
    cols = project(c, node.projections)
    c.guard = None
    row = sg.split_errors(node, row, c.errors, len(node.row_schema))
    if having is not None:
        row = row.filter(having)
    return row.select(*cols, SEQ)


def _aggregate(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Aggregate)
    if node.window.kind != "time":
        from deployer.spark.window_state import count_or_batch_aggregate

        sg.ports[g.Port(node.id)] = count_or_batch_aggregate(sg, node)
        return
    df = watermarked(sg, node)
    ts_index = sg.event_time_index(node.inputs[0])
    assert ts_index is not None, "the compiler guarantees event time for TIME windows"
    c = ExprCompiler()
    keys = [c.compile(k.expr).alias(f"_k{i}") for i, k in enumerate(node.keys)]
    aggs = [
        aggregate_column(a.expr, c).alias(f"_a{i}")
        for i, a in enumerate(node.aggs)
        if isinstance(a.expr, ir.Agg)
    ]
    df = sg.split_errors(node, df, c.errors, len(node.input_schema), on_input=True)
    window = F.window(
        F.col(col_name(ts_index)),
        f"{node.window.size} milliseconds",
        f"{node.window.advance} milliseconds",
    ).alias("_w")
    # The reference emits a window's rows when it closes, in window-end order, the groups in the
    # order of their first event in that window: the first event's order key (event time, then
    # arrival) is kept per window and group to sort the output the same way.
    first = F.min(F.concat(order_key(F.col(col_name(ts_index))), F.lit("|"), F.col(SEQ))).alias("_first")
    grouped = df.groupBy(window, *keys).agg(*aggs, first)
    nk = len(node.keys)
    na = len(node.aggs)
    row = grouped.select(
        *[F.col(f"_k{i}").alias(col_name(i)) for i in range(nk)],
        *[F.col(f"_a{j}").alias(col_name(nk + j)) for j in range(na)],
        F.col("_w.start").alias(col_name(nk + na)),  # window_start(), window_end()
        F.col("_w.end").alias(col_name(nk + na + 1)),
        F.concat(order_key(F.col("_w.end")), F.lit("|"), F.col("_first")).alias(SEQ),
    )
    sg.ports[g.Port(node.id)] = finish_aggregate(sg, node, row)


def _join(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Join)
    left = watermarked(sg, node, 0)
    right = watermarked(sg, node, 1)
    right = right.select(
        *[F.col(col_name(i)).alias(col_name(i, 1)) for i in range(len(node.right_schema))],
        F.col(SEQ).alias("__rseq"),
    )
    lt = F.col(col_name(node.left_schema.position(node.left_time)))
    rt = F.col(col_name(node.right_schema.position(node.right_time), 1))
    sl = F.lit(timedelta(milliseconds=node.left_window.size))
    sr = F.lit(timedelta(milliseconds=node.right_window.size))
    c = ExprCompiler()
    pred = c.compile(node.predicate)
    # The band of the paper's definition (see operators.graph.Join); Spark recognises it as a
    # time-range condition and evicts join state with the watermarks.
    cond = (lt > rt - sl) & (lt < rt + sr)
    keyed = any(_cross_equality(p) for p in ir.conjuncts(node.predicate))
    if not c.errors:
        # NULL and FALSE both reject a pair; left as it is, Spark finds the equality conjuncts
        # (a.k = b.k) and uses them as join keys.
        cond = cond & pred
    else:
        # A pair whose predicate fails must still meet, to be dead-lettered as the reference does.
        # That includes pairs whose key equality is NULL (the reference goes on to evaluate the
        # conjuncts after it), so no equality can serve as a join key here.
        failed = F.lit(False)
        for err, _ in c.errors:
            failed = failed | err
        cond = cond & (F.coalesce(pred, F.lit(False)) | failed)
        keyed = False
    if not keyed:
        # Spark joins two streams only on an equality. Without one, equal time buckets of width
        # Sl + Sr serve: a left event falls in one bucket, a right event is copied to the (at most
        # two) buckets its band (r.ts - Sl, r.ts + Sr) touches, so every pair in the band meets
        # exactly once.
        width = (node.left_window.size + node.right_window.size) * 1000
        ls = node.left_window.size * 1000
        rs = node.right_window.size * 1000
        left = left.withColumn("__bucket", F.floor(F.unix_micros(lt) / F.lit(width)))
        r_us = F.unix_micros(rt)
        buckets = F.sequence(
            F.floor((r_us - F.lit(ls)) / F.lit(width)), F.floor((r_us + F.lit(rs)) / F.lit(width))
        )
        right = right.withColumn("__rbucket", F.explode(buckets))
        cond = cond & (F.col("__bucket") == F.col("__rbucket"))
    joined = left.join(right, cond, "inner")
    # Projections are evaluated only for the pairs the predicate keeps.
    c.guard = F.coalesce(pred, F.lit(False))
    cols = project(c, node.projections, "_o")
    c.guard = None
    nl, nr = len(node.left_schema), len(node.right_schema)
    pair = [F.col(col_name(i)) for i in range(nl)] + [F.col(col_name(i, 1)) for i in range(nr)]
    joined = sg.split_errors(node, joined, c.errors, pair)
    if c.errors:
        joined = joined.filter(pred)
    joined = joined.select(*cols, F.concat(F.col(SEQ), F.lit("|"), F.col("__rseq")).alias(SEQ))
    sg.ports[g.Port(node.id)] = joined.select(
        *[F.col(f"_o{i}").alias(col_name(i)) for i in range(len(cols))], SEQ
    )


def _cross_equality(e: ir.Expr) -> bool:
    """`left.x = right.y`: a comparison of two plain fields of different sides."""
    return (
        isinstance(e, ir.Binary)
        and e.op == "="
        and isinstance(e.left, ir.Col)
        and isinstance(e.right, ir.Col)
        and e.left.side != e.right.side
    )


def upstream_delay(graph: g.Graph, node: g.Node) -> int:
    """The largest WATERMARK delay among the sources a node reads from."""
    delays = [0]
    todo = list(node.inputs)
    while todo:
        n = graph.node(todo.pop().node)
        if isinstance(n, g.Source):
            delays.append(n.watermark_ms or 0)
        todo.extend(n.inputs)
    return max(delays)


def watermarked(sg: SparkGraph, consumer: g.Node, input_index: int = 0) -> DataFrame:
    """The input of a stateful operator with the event-time watermark declared on it: max event time
    minus the largest WATERMARK delay of the sources it comes from (0 when none was declared)."""
    port = consumer.inputs[input_index]
    df = sg.port(port)
    ts_index = sg.event_time_index(port)
    if ts_index is None:
        return df
    producer = sg.graph.node(port.node)
    if _after_join(sg.graph, producer):
        # A Join's output already carries the watermark Spark propagates through it (the inputs'
        # watermarks, less the join's time bound); Spark forbids declaring a second one.
        return df
    delay = (
        upstream_delay(sg.graph, producer)
        if not isinstance(producer, g.Source)
        else producer.watermark_ms or 0
    )
    return df.withWatermark(col_name(ts_index), f"{delay} milliseconds")


def _after_join(graph: g.Graph, node: g.Node) -> bool:
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, g.Join):
            return True
        todo.extend(graph.node(p.node) for p in n.inputs)
    return False


def _readsql(sg: SparkGraph, node: g.Node) -> None:
    from deployer.spark.sql import read_sql

    assert isinstance(node, g.ReadSQL)
    sg.ports[g.Port(node.id)] = read_sql(sg, node)


def _updatesql(sg: SparkGraph, node: g.Node) -> None:
    from deployer.spark.sql import update_sql

    assert isinstance(node, g.UpdateSQL)
    sg.ports[g.Port(node.id)] = update_sql(sg, node)


def _terminal(sg: SparkGraph, node: g.Node) -> None:
    # Sink and Materialize have no output port; spark_run writes their input.
    sg.input(node)


HANDLERS: dict[type[g.Node], Handler] = {
    g.Source: _source,
    g.Map: _map,
    g.Filter: _filter,
    g.MultiFilter: _multifilter,
    g.Union: _union,
    g.Aggregate: _aggregate,
    g.Join: _join,
    g.ReadSQL: _readsql,
    g.UpdateSQL: _updatesql,
    g.Materialize: _terminal,
    g.Sink: _terminal,
}


def named(df: DataFrame, schema: object) -> DataFrame:
    """Give positional columns their real names, for results leaving the engine."""
    from operators.types import Schema

    assert isinstance(schema, Schema)
    return df.select(*[F.col(col_name(i)).alias(f.name) for i, f in enumerate(schema)])


def seq_order(df: DataFrame) -> Column:
    return F.col(SEQ)
