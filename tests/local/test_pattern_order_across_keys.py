"""The order of a pattern's matches that deadlines complete in several partitions at one time: by
partition key, whatever order the keys were met in (deployer/patterns/runner.py `key_text`), so that
an OUTPUT limit after the pattern counts them alike on both engines
(tests/fuzz/test_found_deadlines_of_two_partitions_at_one_time.py)."""

from __future__ import annotations

import pickle
from decimal import Decimal

import pytest
from output_helpers import STREAM, Timeline

from cpl.compiler import compile_script
from deployer.patterns.core import KeyState
from deployer.patterns.runner import PatternRunner, key_text
from operators import graph as g

ABSENCE = "FROM PATTERN e1=s -> NOT s[v > e1.v] FOR 1 SECOND PARTITION BY ip"


@pytest.mark.parametrize("first", ["a", "b"])
def test_deadlines_at_one_time_go_out_by_partition_key(first: str) -> None:
    t = Timeline(f"INSERT INTO o SELECT e1.ip AS ip {ABSENCE};")
    second = "b" if first == "a" else "a"
    assert t.event(100, first, 1) + t.event(100, second, 1) == []
    assert t.wm(5000) == [("a",), ("b",)]  # both absences held until 1100: by key, not arrival


def test_a_keys_text_tells_null_from_the_empty_string_and_ignores_a_decimals_scale() -> None:
    assert key_text(None) != key_text("")
    assert key_text(Decimal("1.0")) == key_text(Decimal("1.00")) != key_text(Decimal("10"))
    assert key_text(4) == "=4"


def test_a_key_state_pickled_before_it_kept_its_key_reads_on() -> None:
    """A checkpoint's key state from before `KeyState.key`: its pickled slots have no `key`."""
    graph = compile_script(f"{STREAM}INSERT INTO o SELECT e1.ip AS ip {ABSENCE};").graph
    runner = PatternRunner(next(n for n in graph.nodes if isinstance(n, g.Pattern)), None)
    state = runner.new_state()
    state.key = "=a"
    assert pickle.loads(pickle.dumps(state)).key == "=a"
    _, slots = state.__reduce_ex__(pickle.HIGHEST_PROTOCOL)[2]
    del slots["key"]
    old = KeyState.__new__(KeyState)
    old.__setstate__((None, slots))
    assert old.key == "" and old.next_order == state.next_order
