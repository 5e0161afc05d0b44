"""Which state layout Spark gives an Aggregate over a TUPLE window: per bucket of groups, or per group.

A pure question of the graph (no pyspark here): the checkpoint rules (deployer.spark.run.compat) tell the
two layouts apart without a JVM, and the translation (deployer.spark.windows.window_state) picks by it.
"""

from __future__ import annotations

from operators import expr as ir
from operators import graph as g

# Fixed for the life of a checkpoint: a group's bucket is where its state is.
BUCKETS = 64
# The kinds of aggregated values the per-bucket layout takes (a timestamp as epoch microseconds).
_KINDS = ("integer", "bigint", "double", "timestamp")


def bucketed(node: g.Aggregate) -> bool:
    """Whether Spark keeps this aggregate's state per bucket of groups (deployer.spark.windows.tuple_buckets):
    a TUPLE window whose aggregated values are all of `_KINDS` (the value of sum and avg is of the
    aggregate's type, of the others of its argument's), count(*) included."""
    if node.window.kind != "tuple":
        return False
    for a in node.aggs:
        agg = a.expr
        assert isinstance(agg, ir.Agg)
        if agg.arg is not None and (
            agg.arg.type.is_null  # sum(NULL), avg(NULL): no number to pack (found by the fuzzer, seed 38208)
            or (agg.type if agg.func in ("sum", "avg") else agg.arg.type).kind not in _KINDS
        ):
            return False
    return True
