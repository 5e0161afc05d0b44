"""Live fields: which fields of each port some consumer reads.

Spark prunes the columns nobody reads across its own operators, but not across a Python operator:
every column of a `mapInArrow` input crosses to the Python worker and back. A ReadSQL whose event
carries fields its consumers never read (the usual case: a stream's schema has more fields than
one statement selects) pays for them twice per event. The analysis below tells it which ones it can
leave behind (deployer.spark.sql.read_sql); it puts typed NULLs in their place after the Python
step, where no consumer looks.

A port's live fields are the union over its consumers of what each reads, walking the graph from
its outputs back. It is conservative: every field is live for a named stream (a sink, the run's
output or a test may read it whole), for an operator whose rows may reach a dead letter (a dead
letter shows the whole event), and for every operator not listed in `_reads`.
"""

from __future__ import annotations

from collections.abc import Callable

from operators import expr as ir
from operators import graph as g

# A set of field positions, or None for "all of them".
Live = frozenset[int] | None


def live_fields(graph: g.Graph, can_fail: Callable[[ir.Expr], bool]) -> dict[g.Port, Live]:
    """The live fields of every port that has a consumer or is a named stream.

    `can_fail(e)`: whether evaluating `e` may raise for some event (its event is then dead-lettered
    whole, so every field of the input is live)."""
    live: dict[g.Port, Live] = {port: None for port in graph.streams.values()}
    for node in reversed(graph.nodes):  # consumers come after their producers
        outs = [live.get(g.Port(node.id, i), frozenset()) for i in range(node.outputs)]
        for port in node.inputs:
            read = _reads(node, outs, can_fail)
            have = live.get(port, frozenset())
            live[port] = None if read is None or have is None else have | read
    return live


def _reads(node: g.Node, outs: list[Live], can_fail: Callable[[ir.Expr], bool]) -> Live:
    """The fields of its input that `node` reads, given the live fields of its outputs."""
    if isinstance(node, g.Map):
        exprs = [p.expr for p in node.projections]
        return None if any(map(can_fail, exprs)) else _columns(exprs)
    if isinstance(node, (g.Filter, g.MultiFilter)):
        preds = [node.predicate] if isinstance(node, g.Filter) else list(node.predicates)
        if any(map(can_fail, preds)):
            return None
        return _union([_columns(preds), *outs])
    if isinstance(node, g.Union):
        return outs[0]
    if isinstance(node, g.ReadSQL):
        # A text argument may hold a NUL, which dead-letters its event on Postgres.
        if any(can_fail(a) or a.type.is_string for a in node.args):
            return None
        width = len(node.input_schema)
        passed = outs[0] if outs[0] is None else frozenset(i for i in outs[0] if i < width)
        return _union([_columns(list(node.args)), passed])
    return None


def _columns(exprs: list[ir.Expr]) -> frozenset[int]:
    return frozenset(c.index for e in exprs for c in ir.columns(e) if c.side == 0)


def _union(sets: list[Live]) -> Live:
    out: frozenset[int] = frozenset()
    for s in sets:
        if s is None:
            return None
        out |= s
    return out
