"""The fuzzer's generator draws every form of pattern and sequence (docs/fuzzing.md, "What it
generates"): generation only, no engine run, so that a form the generator stops drawing fails here,
not silently in a soak that no longer meets it. Every script it draws compiles (the generator
compiles each statement as it goes and raises GeneratorError otherwise)."""

from __future__ import annotations

import re

from fuzz_aims import TIMED_OPERATORS
from fuzz_case import Case
from fuzz_coverage import SHARING, SHARING_ROWS, Coverage
from fuzz_draws import drawn_cases

from cpl.compiler import compile_script
from operators import graph as g
from operators.analysis import out_of_time_order
from operators.output_node import OutputRate

# what each form of docs/language.md's "Patterns" looks like in a drawn statement
FORMS = {
    "PATTERN": r"FROM PATTERN ",
    "SEQUENCE": r"FROM SEQUENCE ",
    "step with a condition": r"\be\d=\w+\[",
    "step without one": r"\be\d=\w+(?![\w\[])",
    "equality with an earlier alias": r"\[(\w+) = e\d\.\1\b",
    "comparison with an earlier alias": r"[\[ ](\w+) [<>]=? e\d\.\1\b",
    "comparison written the other way": r"[\[ ]e\d\.(\w+) [<>]=? \1\b",
    "exact count": r"<\d>",
    "count with a range": r"<\d?:\d>",
    "count with no maximum": r"<\d:>",
    "sequence quantifier": r"[\]\w][+*?](?=[ ,;)]|$)",
    "absence FOR": r"NOT \w+(\[[^\]]*\])? FOR \d",
    "NOT ... AND": r"\(NOT \w+(\[.*?\])? AND e\d",
    "AND": r"\(e\d=.*? AND e\d=",
    "OR": r" OR e\d=",
    "WITHIN": r" WITHIN \d",
    "PARTITION BY": r" PARTITION BY k",
    "WHERE on the matches": r"PARTITION BY k WHERE | WITHIN \d+ \w+ WHERE |\) WHERE |\] WHERE ",
    "indexed value": r"e\d\[(0|last)\]\.\w+ AS",
    "aggregate of a counted step": r"(count|sum|max)\(e\d\.\w+\) AS",
    "match_time()": r"match_time\(\) AS",
    "over two streams": r"",  # checked on the graph
    "over a derived stream": r"",  # checked on the graph
}
PATTERN_ROWS = tuple(
    (op, up, pos)
    for op, up, pos in Coverage().expected()
    if op == "Pattern" or (up == "pattern" and op in TIMED_OPERATORS)
)


def _drawn(n: int) -> list[Case]:
    return drawn_cases(n, PATTERN_ROWS, first_seed=39000, one_target_per_seed=False, stores=(None,))


def _reorders(node: g.Node) -> bool:
    return isinstance(node, OutputRate) and node.reorders


def test_the_generator_draws_every_form_of_pattern() -> None:
    drawn = _drawn(260)  # a case that reads rows out of time order in time order: about 1 in 80
    statements = {
        line
        for c in drawn
        for line in c.script.splitlines()
        if " FROM PATTERN " in line or " FROM SEQUENCE " in line
    }
    assert len(statements) >= 30, f"only {len(statements)} distinct pattern statements in {len(drawn)} cases"
    missing = [name for name, rx in FORMS.items() if rx and not any(re.search(rx, s) for s in statements)]
    assert not missing, f"forms never drawn: {missing}"
    inputs: set[int] = set()
    upstreams: set[str] = set()
    every: set[str] = set()  # EVERY on one element, on a group of them
    unordered = 0  # patterns over rows out of time order (a join's, another pattern's partitions)
    # patterns over a source without a WATERMARK delay: no Sequencer before the processor, so an
    # event at the watermark reaches it (Spark failed a match at it: test_ties_at_the_watermark.py)
    undelayed = 0
    for c in drawn:
        graph = compile_script(c.script).graph
        for node in graph.nodes:
            if isinstance(node, g.Pattern):
                inputs.add(len(node.inputs))
                upstreams |= {type(graph.node(p.node)).__name__ for p in node.inputs}
                unordered += any(out_of_time_order(graph, p) for p in node.inputs)
                ups = [graph.node(p.node) for p in node.inputs]
                undelayed += any(isinstance(u, g.Source) and not u.watermark_ms for u in ups)
                for i, state in enumerate(node.automaton.states):
                    if state.every is not None:
                        every.add("element" if state.every == i else "group")
    assert inputs >= {1, 2}, inputs
    # what depends on order reads a partitioned pattern's or a join's rows in time order (cpl.plan_order)
    reordered = [c for c in drawn if any(_reorders(n) for n in compile_script(c.script).graph.nodes)]
    assert reordered, "no case reads rows out of time order in time order"
    assert unordered, "no pattern reads rows out of time order"
    assert every == {"element", "group"}, every
    assert undelayed >= 10, f"only {undelayed} patterns over a source without a delay"
    assert len(upstreams - {"Source"}) >= 3, f"patterns read only {upstreams}"


def test_aimed_cases_put_a_failing_expression_at_each_position_of_a_pattern() -> None:
    """A case aimed at a Pattern's position has an expression there meant to fail (fuzz_exprs.failing):
    one that can raise (a CAST, a division, an overflow) is in the compiled node at that position."""
    drawn = _drawn(60)
    cov = Coverage()
    for c in drawn:
        cov.add(c.script, [], silent=False)
    had = {(op, pos) for (op, _, pos), n in cov.had.items() if n and op == "Pattern"}
    assert had >= {("Pattern", "condition"), ("Pattern", "WHERE"), ("Pattern", "SELECT")}, had
    assert any(up == "pattern" and n for (op, up, _), n in cov.had.items() if op != "Pattern"), (
        "no operator read a pattern's output"
    )


def test_aimed_cases_draw_pattern_sinks_alone_and_sharing_a_query() -> None:
    """Patterns over the same source streams share a query on Spark (deployer.spark.run.pattern_groups):
    cases aimed at those lines of the coverage table draw them, where unaimed ones rarely put two
    patterns' sinks over the same streams."""
    cov = Coverage()
    drawn = drawn_cases(30, (SHARING_ROWS[1],), first_seed=59000) + drawn_cases(
        15, (SHARING_ROWS[0],), first_seed=60000
    )
    for c in drawn:
        cov.add(c.script, [], silent=False, sinks=c.sinks)
    assert cov.had[(SHARING, "beside others", "-")] >= 15, cov.had
    assert cov.had[(SHARING, "alone", "-")] >= 10, cov.had
    assert not set(SHARING_ROWS) & set(cov.gaps())
