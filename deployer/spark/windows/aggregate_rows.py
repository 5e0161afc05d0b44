"""HAVING and the projections of an Aggregate, over the rows its window produced (any window kind)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.output.placement import WINDOW_TIME, feeds_window_limit
from deployer.spark.translate.columns import col_name, encoded_event
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.graph import SEQ, SparkGraph, project
from operators import expr as ir
from operators import graph as g
from operators.analysis import can_overflow

# Why a window's row cannot be emitted (an aggregate overflowed its type), NULL when it can: a
# column of the aggregated row, beside `__seq`, from every kind of window.
AGG_ERR = "__aggerr"
# An event a BATCH window's state refused, beside the window's rows: why (its START or STOP failed on
# it, which only the state can tell: the condition is evaluated in one state of the window and not
# in the other), and the event as its dead letter carries it (`columns.encoded_event`, as JSON).
REFUSED = "__refused"
REFUSED_EVENT = "__refused_event"


def finish_aggregate(sg: SparkGraph, node: g.Aggregate, row: DataFrame, refused: bool = False) -> DataFrame:
    """HAVING and the projections over the aggregated row (columns `_0..` = `node.row_schema`).

    As in the reference executor, an aggregate that overflowed its type (`AGG_ERR`), or an error in
    HAVING or in a projection, dead-letters the row, and the projections are only evaluated for
    rows that HAVING keeps. `refused`: the rows also hold the events the window's state refused
    (`REFUSED`), dead-lettered at the same failure point."""
    planned = any(isinstance(a.expr, ir.Agg) and can_overflow(a.expr) for a in node.aggs)
    if not planned:
        # No aggregate can overflow in a window of fewer than 10^9 events (a sum of integers takes
        # 2^32): the deployment planned no failure point for them, so one that does stops the run
        # with its reason rather than vanish (docs/language.md, "Engines").
        raised = F.when(F.col(AGG_ERR).isNotNull(), F.raise_error(F.col(AGG_ERR)))
        row = row.filter(F.coalesce(raised.cast("boolean"), F.lit(True)))
    c = ExprCompiler()
    overflowed = F.col(AGG_ERR).isNotNull()
    ok = ~overflowed if not refused else ~overflowed & F.col(REFUSED).isNull()
    c.guard = ok
    having = c.compile(node.having) if node.having is not None else None
    if having is not None:
        c.guard = ok & F.coalesce(having, F.lit(False))
    cols = project(c, node.projections, timed=node.event_time)
    c.guard = None
    errors = [(overflowed, F.col(AGG_ERR)), *c.errors] if planned else c.errors
    event: Column | None = None
    if refused:
        errors = [(F.col(REFUSED).isNotNull(), F.col(REFUSED)), *errors]
        whole = [(F.col(col_name(i)), row.schema[col_name(i)].dataType) for i in range(len(node.row_schema))]
        event = F.when(
            F.col(REFUSED).isNotNull(), F.from_json(F.col(REFUSED_EVENT), T.ArrayType(T.StringType()))
        ).otherwise(encoded_event(whole))

    # the row's time with Spark's watermark, for a limit in Spark's window aggregation (in_window.py)
    timed = [WINDOW_TIME] if feeds_window_limit(sg.graph, node) else []

    def then(kept: DataFrame) -> DataFrame:
        return (kept if having is None else kept.filter(having)).select(*cols, SEQ, *timed)

    return sg.split_errors(node, row, errors, len(node.row_schema), then=then, event=event)
