"""HAVING and the projections of an Aggregate, over the rows its window produced (any window kind)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deployer.spark.expr import ExprCompiler
from deployer.spark.graph import SEQ, SparkGraph, project
from operators import graph as g


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
