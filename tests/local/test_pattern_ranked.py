"""Partials sorted by a range link (`duration > e1.duration`, deployer.patterns.partial.Ranked): an
event looks only at those the comparison lets through, and the automaton decides exactly what it
decides when it tries every partial waiting there, in the same order. Hypothesis draws the events
(ties, NULLs, every comparison and both ways of writing it) and compares the two automata."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpl.compiler import compile_script
from deployer.patterns.partial import Ranked
from deployer.patterns.program import StepCode
from deployer.patterns.runner import Emit, Fail, PatternRunner
from operators import patterns as pt
from operators.pattern_node import Pattern

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = "CREATE STREAMSCHEMA s WITH k integer, v integer, d decimal(10,2), ts timestamp TIMESTAMP BY ts;\n"
LINKS = [
    "v > e1.v",
    "v >= e1.v",
    "v < e1.v",
    "v <= e1.v",
    "e1.v < v",
    "e1.v >= v",
    "d > e1.d AND v <> 3",
    "ts > e1.ts",
]
SHAPES = [
    "SELECT e1.v AS a, e2.v AS b FROM PATTERN EVERY e1=s[k = 0] -> e2=s[{link}] WITHIN 20 SECONDS",
    "SELECT e1.v AS a, e2.v AS b, e3.d AS c FROM PATTERN EVERY e1=s[k = 0] -> e2=s[{link}] -> e3=s[k = 2]",
    "SELECT e1[0].v AS a, e1[last].v AS l, e3.d AS b "
    "FROM PATTERN EVERY e1=s[k = 0]<1:3> -> e2=s[k = 1] -> e3=s[{link.e1}]",
    "SELECT e1.v AS a, count(e2.v) AS n, e3.v AS b FROM SEQUENCE EVERY e1=s[k = 0], e2=s[k <> 9]*, e3=s[{link}]",
    "SELECT e1.v AS a, e2.v AS b, e3.v AS c FROM PATTERN EVERY (e1=s[k = 0] -> e2=s[{link}]) -> e3=s[{link}]",
]


def pattern(shape: str, link: str) -> Pattern:
    # `{link.e1}`: the link on e1[last], for a counted first step (fixed once a later step is bound)
    text = shape.replace("{link.e1}", link.replace("e1.", "e1[last].")).replace("{link}", link)
    graph = compile_script(f"{SCHEMA}INSERT INTO o {text};").graph
    return next(n for n in graph.nodes if isinstance(n, Pattern))


def without_rank(runner: PatternRunner) -> None:
    """The same automaton trying every partial waiting at each ranked state."""
    for state in runner.program.states:
        side = state.sides[0]
        if isinstance(side, StepCode) and side.rank is not None:
            side.rank = side.event_key = side.partial_key = None


def drive(runner: PatternRunner, events: list[tuple[Any, ...]]) -> list[Any]:
    m = runner.matcher(runner.new_state())
    out: list[Emit | Fail] = []
    for i, (ms, *values) in enumerate(events):
        t = T0 + timedelta(milliseconds=ms)
        micros = int((t - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)
        out += runner.on_event(m, 0, (*values, t), micros, f"{i:06d}")
    out += runner.on_time(m, 2**62)
    return out


event = st.tuples(
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 5)),
    st.one_of(st.none(), st.integers(0, 5).map(lambda n: Decimal(n) / 2)),
)


@pytest.mark.parametrize("shape", SHAPES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_ranked_partials_decide_as_trying_them_all(shape: str, data: st.DataObject) -> None:
    link = data.draw(st.sampled_from(LINKS))
    node = pattern(shape, link)
    ranked, every = PatternRunner(node, None), PatternRunner(node, None)
    without_rank(every)
    assert any(isinstance(p, Ranked) for p in ranked.new_state().pending)
    assert not any(isinstance(p, Ranked) for p in every.new_state().pending)
    draws = data.draw(st.lists(st.tuples(st.integers(0, 4000), event), max_size=40))
    events = [(ms, *e) for ms, e in sorted(draws, key=lambda d: d[0])]
    assert drive(ranked, events) == drive(every, events)


def test_the_planner_ranks_only_exact_comparisons_in_conditions_that_cannot_fail() -> None:
    def condition(link: str) -> pt.Condition | None:
        node = pattern("SELECT e2.v AS v FROM PATTERN EVERY e1=s[k = 0] -> e2=s[{link}]", link)
        element = node.automaton.states[1].element
        assert isinstance(element, pt.Step)
        return element.condition

    def rank(link: str) -> tuple[int, int, str] | None:
        c = condition(link)
        return None if c is None else c.rank

    assert rank("v > e1.v") == (1, 0, ">")
    assert rank("e1.v > v") == (1, 0, "<")  # the event's value on the left
    assert rank("v > e1.v AND k = 1") == (1, 0, ">")
    assert rank("k = e1.k AND v > e1.v") is None  # an equality is indexed instead
    cond = condition("k = e1.k AND v > e1.v")
    assert cond is not None and cond.key is not None
    assert rank("v / k > e1.v") is None  # no bare field
    assert rank("v > e1.v AND v / k > 1") is None  # a conjunct can fail (division by zero)
    assert rank("CAST(v AS double) > CAST(e1.v AS double)") is None
    assert rank("v > e1.v + 1") is None
