"""Operator graph → Spark Structured Streaming DataFrames, one handler per operator.

Every port of the graph becomes a streaming DataFrame whose columns are named by position (`_0`,
`_1`, ...; see `deployer.spark_expr`). Stateless operators and TIME-window aggregates and joins are
native Spark (DESIGN.md decision 3); TUPLE and BATCH windows use per-key ordered state
(`deployer.spark_state`); ReadSQL/UpdateSQL run in Arrow batches against the stores
(`deployer.spark_sql`). Terminal nodes (Sink, Materialize) are turned into streaming queries by
`deployer.spark_run`.

Rows that fail an expression (division by zero, a bad CAST) are split off into dead-letter
DataFrames with the reason, as the reference executor does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deployer.spark_expr import ExprCompiler, col_name, error_column, spark_type
from operators import expr as ir
from operators import graph as g

ERR = "__err"  # the per-row error column while it exists
# Every row carries its arrival position: a string that sorts in arrival order and is the same when
# a batch is replayed (it derives from the source position). Per-key ordered state sorts by it, and
# it identifies an event for exactly-once side effects.
SEQ = "__seq"


@dataclass(frozen=True)
class DeadLetter:
    """Rows that failed in node `node` (script line `line`): `reason` and the event as JSON."""

    node: str
    line: int
    df: DataFrame


@dataclass
class SparkGraph:
    """The translated graph: a DataFrame per port, and the dead-letter DataFrames found on the way."""

    graph: g.Graph
    sources: dict[str, DataFrame]  # stream name → typed streaming DataFrame (positional columns)
    stores_config: object = None  # passed to ReadSQL/UpdateSQL executors (see deployer.spark_sql)
    ports: dict[g.Port, DataFrame] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)

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
        self, node: g.Node, df: DataFrame, errors: list[tuple[Column, str]], width: int
    ) -> DataFrame:
        """Route rows with an error to a dead letter; return the others without the error column."""
        err = error_column(errors)
        if err is None:
            return df
        df = df.withColumn(ERR, err)
        payload = F.to_json(F.struct(*[F.col(col_name(i)) for i in range(width)]))
        self.dead_letters.append(
            DeadLetter(
                node.id,
                node.line,
                df.filter(F.col(ERR).isNotNull()).select(F.col(ERR).alias("reason"), payload.alias("event")),
            )
        )
        return df.filter(F.col(ERR).isNull()).drop(ERR)


Handler = Callable[[SparkGraph, g.Node], None]


def _source(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Source)
    # The watermark is declared where a stateful operator needs it (`watermarked`), not here: Spark
    # allows one definition per lineage, and Python operators (mapInArrow) on the way would hide it.
    sg.ports[g.Port(node.id)] = sg.sources[node.stream]


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
    c = ExprCompiler()
    cols = project(c, node.projections)
    if c.errors:
        # Evaluate the error conditions against the input row, before projecting it away.
        df = sg.split_errors(node, df, c.errors, len(node.input_schema))
    sg.ports[g.Port(node.id)] = df.select(*cols, SEQ)


def _filter(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Filter)
    c = ExprCompiler()
    pred = c.compile(node.predicate)
    df = sg.split_errors(node, sg.input(node), c.errors, len(node.input_schema))
    sg.ports[g.Port(node.id)] = df.filter(pred)


def _multifilter(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.MultiFilter)
    c = ExprCompiler()
    preds = [c.compile(p) for p in node.predicates]
    df = sg.split_errors(node, sg.input(node), c.errors, len(node.input_schema))
    for i, p in enumerate(preds):
        sg.ports[g.Port(node.id, i)] = df.filter(p)


def _union(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Union)
    frames = []
    for i in range(len(node.inputs)):
        df = sg.input(node, i)
        # Same kinds by construction; cast so that e.g. char(5) and varchar(9) line up exactly.
        given = sg.graph.node(node.inputs[i].node).schema
        cols = [
            F.col(col_name(j))
            if given.fields[j].type == f.type
            else F.col(col_name(j)).cast(spark_type(f.type)).alias(col_name(j))
            for j, f in enumerate(node.schema)
        ]
        frames.append(df.select(*cols, SEQ))
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


def finish_aggregate(sg: SparkGraph, node: g.Aggregate, row: DataFrame) -> DataFrame:
    """HAVING and the projections over the aggregated row (columns `_0..` = keys ++ aggregates)."""
    c = ExprCompiler()
    if node.having is not None:
        row = row.filter(c.compile(node.having))
    cols = project(c, node.projections)
    width = len(node.row_schema)
    row = sg.split_errors(node, row, c.errors, width)
    return row.select(*cols, SEQ)


def _aggregate(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Aggregate)
    if node.window.kind != "time":
        from deployer.spark_state import count_or_batch_aggregate

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
    df = sg.split_errors(node, df, c.errors, len(node.input_schema))
    window = F.window(
        F.col(col_name(ts_index)),
        f"{node.window.size} milliseconds",
        f"{node.window.advance} milliseconds",
    ).alias("_w")
    grouped = df.groupBy(window, *keys).agg(*aggs)
    nk = len(node.keys)
    na = len(node.aggs)
    row = grouped.select(
        *[F.col(f"_k{i}").alias(col_name(i)) for i in range(nk)],
        *[F.col(f"_a{j}").alias(col_name(nk + j)) for j in range(na)],
        F.col("_w.start").alias(col_name(nk + na)),  # window_start(), window_end()
        F.col("_w.end").alias(col_name(nk + na + 1)),
        # an aggregate's output sorts by window end, then by group
        F.concat(
            F.date_format(F.col("_w.end"), "yyyyMMddHHmmssSSSSSS"),
            F.to_json(F.struct(*[F.col(f"_k{i}") for i in range(nk)])),
        ).alias(SEQ),
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
    cond = (lt > rt - sl) & (lt < rt + sr) & F.coalesce(pred, F.lit(False))
    joined = left.join(right, cond, "inner")
    cols = project(c, node.projections, "_o")
    joined = joined.select(*cols, F.concat(F.col(SEQ), F.lit("|"), F.col("__rseq")).alias(SEQ))
    sg.ports[g.Port(node.id)] = joined.select(
        *[F.col(f"_o{i}").alias(col_name(i)) for i in range(len(cols))], SEQ
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
    delay = upstream_delay(sg.graph, producer) if not isinstance(producer, g.Source) else producer.watermark_ms or 0
    return df.withWatermark(col_name(ts_index), f"{delay} milliseconds")


def _readsql(sg: SparkGraph, node: g.Node) -> None:
    from deployer.spark_sql import read_sql

    assert isinstance(node, g.ReadSQL)
    sg.ports[g.Port(node.id)] = read_sql(sg, node)


def _updatesql(sg: SparkGraph, node: g.Node) -> None:
    from deployer.spark_sql import update_sql

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
