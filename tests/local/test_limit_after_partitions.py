"""A limit that decides as a row comes (EVERY n EVENTS, FIRST EVERY duration) after a pattern with
PARTITION BY: it takes rows once the watermark has passed them, in time order (deployer/output/limiter.py
`InTimeOrder`), since on Spark a partition's rows may come a micro-batch before another's earlier ones
(tests/fuzz/test_found_a_limit_after_partitions_that_run_apart.py). Its output has no event time."""

from __future__ import annotations

import pytest
from output_helpers import Timeline

from cpl.compiler import compile_script
from cpl.errors import CompileError
from deployer.output.limiter import AllEvents, FirstEvery, InTimeOrder, LastEvents
from operators.output_node import OutputRate

S = 1_000_000  # a second, in µs
PAIRS = "FROM PATTERN EVERY e1=s -> e2=s[v > e1.v] WITHIN 10 SECONDS"


def test_rows_are_fed_in_time_order_once_the_watermark_has_passed_them() -> None:
    limiter = InTimeOrder(AllEvents(2))
    assert limiter.row(("p",), ("later",), 7 * S, "2") == []  # one partition's, ahead
    assert limiter.due() == 7 * S + 1  # the watermark past it
    assert limiter.row(("q",), ("earlier",), 5 * S, "1") == []  # another's, behind it
    assert limiter.due() == 5 * S + 1
    assert limiter.tick(5 * S) == []  # not passed yet: a row at 5 s may still come
    assert limiter.row(("q",), ("same time",), 5 * S, "0") == []
    assert limiter.tick(6 * S) == [(("same time",), 5 * S), (("earlier",), 5 * S)]  # by order key
    assert limiter.end(7 * S) == []  # the final watermark has not passed 7 s: not counted
    assert limiter.due() == 7 * S + 1


def test_first_every_decides_in_time_order_not_in_arrival_order() -> None:
    limiter = InTimeOrder(FirstEvery(S))
    limiter.row((), ("b",), 5 * S + S // 2, "2")
    limiter.row((), ("a",), 5 * S, "1")  # came later, happened first: it goes out, b does not
    assert limiter.tick(10 * S) == [(("a",), 5 * S)]


def test_the_inner_limiters_own_state_is_kept() -> None:
    limiter = InTimeOrder(LastEvents(2))
    limiter.row(("g",), ("g1",), 1 * S, "1")
    limiter.row(("h",), ("h1",), 2 * S, "2")
    limiter.row(("g",), ("g2",), 3 * S, "3")
    assert limiter.tick(3 * S) == [(("g1",), S), (("h1",), 2 * S)]
    assert limiter.tick(4 * S) == []  # g2 counted, its bucket not full
    assert limiter.due() is None


def _rate(script: str) -> OutputRate:
    graph = compile_script(script).graph
    return next(n for n in graph.nodes if isinstance(n, OutputRate))


@pytest.mark.parametrize(
    ("clause", "partition", "in_order"),
    [
        ("OUTPUT FIRST EVERY 1 SECOND", " PARTITION BY ip", True),
        ("OUTPUT EVERY 3 EVENTS", " PARTITION BY ip", True),
        ("OUTPUT LAST EVERY 3 EVENTS", " PARTITION BY ip", True),
        ("OUTPUT FIRST EVERY 2 EVENTS", " PARTITION BY ip", True),
        ("OUTPUT LAST EVERY 1 SECOND", " PARTITION BY ip", False),  # chooses by time when it ticks
        ("OUTPUT EVERY 1 SECOND", " PARTITION BY ip", False),
        ("OUTPUT FIRST EVERY 1 SECOND", "", False),  # one automaton: its rows come in time order
    ],
)
def test_which_limits_wait_for_the_watermark(clause: str, partition: str, in_order: bool) -> None:
    node = _rate(
        "CREATE STREAMSCHEMA s WITH ip varchar, v integer, ts timestamp TIMESTAMP BY ts;\n"
        f"INSERT INTO o SELECT e2.v AS v, match_time() AS t {PAIRS}{partition} {clause};"
    )
    assert node.in_time_order is in_order
    assert ("in_time_order" in node.params()) is in_order  # cep explain shows it
    if clause.startswith("OUTPUT FIRST"):
        assert (node.event_time is None) is in_order  # its rows leave behind the watermark


def test_a_time_window_over_first_after_partitions_is_refused_with_the_reason() -> None:
    script = (
        "CREATE STREAMSCHEMA s WITH ip varchar, v integer, ts timestamp TIMESTAMP BY ts;\n"
        f"INSERT INTO o SELECT e2.v AS v, match_time() AS t {PAIRS} PARTITION BY ip "
        "OUTPUT FIRST EVERY 1 SECOND;\n"
        "INSERT INTO w SELECT count(*) AS n FROM o WINDOW TIME SIZE 1 SECOND;\n"
    )
    with pytest.raises(CompileError) as info:
        compile_script(script)
    message = str(info.value)
    assert "a TIME window needs event time" in message and "line 2" in message
    assert "OUTPUT FIRST after a pattern with PARTITION BY" in message


@pytest.mark.parametrize("past_the_last", [False, True])
def test_first_after_partitions_on_the_reference_executor(past_the_last: bool) -> None:
    t = Timeline(
        f"INSERT INTO o SELECT e1.ip AS ip, e2.v AS v {PAIRS} PARTITION BY ip OUTPUT FIRST EVERY 1 SECOND;"
    )
    out = t.event(100, "a", 1) + t.event(200, "a", 2) + t.event(300, "b", 1) + t.event(400, "b", 5)
    out += t.event(2500, "b", 9)  # b's match at 400 came less than a second after a's at 200
    assert out == [("a", 2)]
    # b's match at 2500: the final watermark (2500, no WATERMARK delay) has not passed it, so it is
    # dropped, as a bucket the final watermark does not close is; moved past it, it goes out
    last = t.wm(2501) if past_the_last else []
    assert last + t.finish() == ([("b", 9)] if past_the_last else [])
