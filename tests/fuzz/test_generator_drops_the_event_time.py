"""The fuzzer's generator draws SELECTs that drop the event time of a delayed stream's events and of
a merge's rows (fuzz_statements.map_select), which a sink, a keyed table or an update then reads in
the order the language gives them (tests/fuzz/test_found_an_update_before_a_keyed_table.py,
test_found_a_merge_without_its_event_time.py): a generator that stops drawing them fails here, not
silently in a soak. Generation only, no engine run."""

from __future__ import annotations

from fuzz_case import Case
from fuzz_draws import drawn_cases

from cpl.compiler import compile_script
from operators import graph as g
from operators.analysis import from_timed_merge, in_release_order


def _drops(cases: list[Case]) -> tuple[int, int]:
    """(Maps that drop a delayed stream's event time, Maps that drop a merge's) in `cases`."""
    delayed = merged = 0
    for c in cases:
        graph = compile_script(c.script).graph
        for node in graph.nodes:
            if not isinstance(node, g.Map) or node.event_time is not None:
                continue
            if graph.node(node.inputs[0].node).event_time is None:
                continue
            delayed += in_release_order(graph, g.Port(node.id))
            merged += from_timed_merge(graph, node.inputs[0])
    return delayed, merged


def test_the_generator_drops_the_event_time_of_delayed_streams_and_merges() -> None:
    delayed, merged = _drops(drawn_cases(400, (), first_seed=62000))
    assert delayed >= 9, delayed  # 12 in these 400 cases (5 without map_select dropping it)
    assert merged >= 1, merged  # 2 (1 without it): a Map after a merge with event time is rarer
