"""Where the translation of an operator splits failed rows off into dead letters, answered from the
graph alone (no pyspark here): deployer.spark.run.queries plans a query for each that no other
query writes."""

from __future__ import annotations

from collections.abc import Mapping

from operators import expr as ir
from operators import graph as g
from operators.analysis import can_fail, can_overflow, stateless_upstream


def failure_points(
    node: g.Node, graph: g.Graph, store_kinds: Mapping[str, str], rejecting: bool
) -> list[tuple[bool, bool]]:
    """The places where the translation of `node` splits failed rows off into a dead letter, in the
    order it does: (whether the failed rows are the node's input rather than its results, whether
    they go to the shared dead-letters query). `store_kinds`: the bound kind of every data store
    (lower-case names); `rejecting`: for a Source, whether its stream's source already dead-letters
    events without event time with its rejected records."""
    own = stateless_upstream(graph, node)
    if isinstance(node, g.Source):
        return [(False, True)] if node.event_time is not None and not rejecting else []
    if isinstance(node, g.Map):
        return [(False, own)] if any(can_fail(p.expr) for p in node.projections) else []
    if isinstance(node, g.Filter | g.MultiFilter):
        preds = [node.predicate] if isinstance(node, g.Filter) else list(node.predicates)
        return [(False, own)] if any(map(can_fail, preds)) else []
    before = (True, stateless_upstream(graph, node, on_input=True))
    if isinstance(node, g.Aggregate):
        read = [k.expr for k in node.keys] + [a.expr for a in node.aggs]
        rows = [p.expr for p in node.projections] + ([node.having] if node.having is not None else [])
        # a BATCH window's START and STOP fail in its state (only while closed, only while open):
        # the events they refuse come out with the window's rows (deployer.spark.windows.window_state)
        rows += [c for c in (node.window.start, node.window.stop) if c is not None]
        overflow = any(isinstance(a.expr, ir.Agg) and can_overflow(a.expr) for a in node.aggs)
        return ([before] if any(map(can_fail, read)) else []) + (
            [(False, False)] if overflow or any(map(can_fail, rows)) else []
        )
    if isinstance(node, g.Join):
        exprs = [node.predicate, *(p.expr for p in node.projections)]
        return [(False, False)] if any(map(can_fail, exprs)) else []
    if isinstance(node, g.Pattern):
        return [(False, False)]  # always: beyond the cap of open partials, the oldest is dead-lettered
    if isinstance(node, g.ReadSQL):
        nul = store_kinds.get(node.query.store.lower()) == "postgresql" and any(
            a.type.is_string for a in node.args
        )
        # and always one for the events the store refuses or whose results do not fit (deployer.spark.datastores.sql)
        return ([before] if nul or any(map(can_fail, node.args)) else []) + [(False, False)]
    if isinstance(node, g.UpdateSQL):
        return ([before] if any(map(can_fail, node.args)) else []) + [(False, False)]
    return []
