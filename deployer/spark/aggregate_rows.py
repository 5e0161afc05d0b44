"""HAVING and the projections of an Aggregate, over the rows its window produced (any window kind)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deployer.spark.expr import ExprCompiler
from deployer.spark.graph import SEQ, SparkGraph, project
from operators import expr as ir
from operators import graph as g
from operators.analysis import can_overflow

# Why a window's row cannot be emitted (an aggregate overflowed its type), NULL when it can: a
# column of the aggregated row, beside `__seq`, from every kind of window.
AGG_ERR = "__aggerr"


def finish_aggregate(sg: SparkGraph, node: g.Aggregate, row: DataFrame) -> DataFrame:
    """HAVING and the projections over the aggregated row (columns `_0..` = `node.row_schema`).

    As in the reference executor, an aggregate that overflowed its type (`AGG_ERR`), or an error in
    HAVING or in a projection, dead-letters the row, and the projections are only evaluated for
    rows that HAVING keeps."""
    planned = any(isinstance(a.expr, ir.Agg) and can_overflow(a.expr) for a in node.aggs)
    if not planned:
        # No aggregate can overflow in a window of fewer than 10^9 events (a sum of integers takes
        # 2^32): the deployment planned no failure point for them, so one that does stops the run
        # with its reason rather than vanish (docs/language.md, "Engines").
        raised = F.when(F.col(AGG_ERR).isNotNull(), F.raise_error(F.col(AGG_ERR)))
        row = row.filter(F.coalesce(raised.cast("boolean"), F.lit(True)))
    c = ExprCompiler()
    ok = F.col(AGG_ERR).isNull()
    c.guard = ok
    having = c.compile(node.having) if node.having is not None else None
    if having is not None:
        c.guard = ok & F.coalesce(having, F.lit(False))
    cols = project(c, node.projections, timed=node.event_time)
    c.guard = None
    errors = [(~ok, F.col(AGG_ERR)), *c.errors] if planned else c.errors

    def then(kept: DataFrame) -> DataFrame:
        return (kept if having is None else kept.filter(having)).select(*cols, SEQ)

    return sg.split_errors(node, row, errors, len(node.row_schema), then=then)
