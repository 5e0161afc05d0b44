"""The fuzzer's generator draws SELECTs that drop the event time of a delayed stream's events and of
a merge's rows (fuzz_statements.map_select), which a sink, a keyed table or an update then reads in
the order the language gives them (tests/fuzz/test_found_an_update_before_a_keyed_table.py,
test_found_a_merge_without_its_event_time.py): a generator that stops drawing them fails here, not
silently in a soak. Generation only, no engine run."""

from __future__ import annotations

from fuzz_case import Case
from fuzz_coverage import RELEASED_ROWS, Coverage
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


def test_aimed_cases_draw_what_takes_a_delayed_streams_rows_in_order_after_such_a_select() -> None:
    """Unaimed, few of those SELECTs are read by a TUPLE or BATCH window or an OUTPUT limit, which
    take the rows in the order the stream released them (test_found_a_select_without_a_delayed_
    streams_event_time.py); a case aimed at those lines of the coverage table makes one."""
    cov = Coverage()
    drawn = drawn_cases(30, (RELEASED_ROWS[0],), first_seed=63000) + drawn_cases(
        30, (RELEASED_ROWS[1],), first_seed=64000
    )
    for c in drawn:
        cov.add(c.script, [], silent=False, sinks=c.sinks)
    assert cov.had[RELEASED_ROWS[0]] >= 15, cov.had
    assert cov.had[RELEASED_ROWS[1]] >= 15, cov.had
    assert not set(RELEASED_ROWS) & set(cov.gaps())
