"""The fuzzer's generator never lets a statement whose result depends on order read what a Union
without event time produced (docs/language.md, "Merges without event time": such a merge's inputs
interleave as each engine reads them), and still draws such statements over Unions with event time
and untimed Unions under order-free statements. Generation only, no engine run."""

from __future__ import annotations

from fuzz_coverage import POSITIONS, READS
from fuzz_draws import drawn_cases

from cpl.compiler import compile_script
from operators import graph as g
from operators.output_node import OutputRate


def _order_dependent(node: g.Node) -> bool:
    if isinstance(node, g.Aggregate):
        return node.window.kind in ("tuple", "batch")
    if isinstance(node, g.Materialize):
        return bool(node.table.primary_key)
    return isinstance(node, (OutputRate, g.UpdateSQL))


def _untimed_merge_above(graph: g.Graph, node: g.Node) -> bool:
    seen: set[str] = set()
    todo = [p.node for p in node.inputs]
    while todo:
        up = graph.node(todo.pop())
        if up.id in seen:
            continue
        seen.add(up.id)
        if isinstance(up, g.Union) and getattr(up, "event_time", None) is None:
            return True
        todo.extend(p.node for p in up.inputs)
    return False


def test_no_order_dependent_statement_reads_an_untimed_merge() -> None:
    union_rows = tuple(
        (op, "union", pos) for op, positions in POSITIONS.items() if "union" in READS[op] for pos in positions
    )
    drawn = drawn_cases(6 * len(union_rows), union_rows, first_seed=43000, per_seed=2)
    untimed_merges = over_timed_merges = 0
    for c in drawn:
        graph = compile_script(c.script).graph
        for node in graph.nodes:
            if isinstance(node, g.Union) and getattr(node, "event_time", None) is None:
                untimed_merges += 1
            if not _order_dependent(node):
                continue
            assert not _untimed_merge_above(graph, node), (
                f"{node.op} {node.id} reads an untimed merge:\n{c.script}"
            )
            over_timed_merges += any(isinstance(graph.node(p.node), g.Union) for p in node.inputs)
    # not vacuous: both kinds of merge are drawn, and order-dependent statements read the timed ones
    assert untimed_merges >= 5, untimed_merges
    assert over_timed_merges >= 5, over_timed_merges
