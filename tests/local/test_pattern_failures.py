"""What a pattern dead-letters on the reference executor: an event a step's condition fails on (it
changes nothing: no partial moves, none starts), a match whose SELECT or WHERE fails, and the oldest
partial of a key beyond CEP_PATTERN_MAX_PARTIALS."""

from __future__ import annotations

import pytest
from pattern_helpers import run


def test_an_event_a_condition_fails_on_is_dead_lettered_and_changes_nothing() -> None:
    out = run(
        "INSERT INTO o SELECT e1.price AS p1, e2.price AS p2 FROM PATTERN EVERY e1=a "
        "-> e2=b[CAST(symbol AS integer) > e1.price];",
        [("a", 0, "A", 1.0), ("b", 1, "x", 1.0), ("b", 2, "5", 1.0)],
    )
    assert out["o"] == [(1.0, 1.0)]
    assert out["dead"] == [("Pattern", "cannot cast 'x' to integer")]


def test_a_failing_condition_evaluated_for_no_partial_is_no_failure() -> None:
    # no partial waits for b when the 'x' comes: its condition is not evaluated
    out = run(
        "INSERT INTO o SELECT e2.price AS p2 FROM PATTERN e1=a -> e2=b[CAST(symbol AS integer) > 0];",
        [("b", 0, "x", 1.0), ("a", 1, "A", 1.0), ("b", 2, "5", 2.0)],
    )
    assert out["o"] == [(2.0,)] and out["dead"] == []


def test_a_match_whose_select_fails_is_dead_lettered() -> None:
    out = run(
        "INSERT INTO o SELECT e1.price AS p1, 10 / e1.volume AS r FROM PATTERN EVERY e1=a -> e2=b;",
        [("a", 0, "A", 1.0, 0), ("a", 1, "B", 2.0, 5), ("b", 2, "C", 3.0)],
    )
    assert out["o"] == [(2.0, 2.0)]
    assert out["dead"] == [("Pattern", "division by zero")]


def test_beyond_the_cap_the_oldest_partial_is_dropped_and_dead_lettered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CEP_PATTERN_MAX_PARTIALS", "3")
    out = run(
        "INSERT INTO o SELECT e1.price AS p1 FROM PATTERN EVERY e1=a -> e2=b;",
        [("a", i, "A", float(i)) for i in range(5)] + [("b", 10, "B", 0.0)],
    )
    # the armed start counts too: three partials at most, the two oldest waiting ones dropped
    assert sorted(out["o"]) == [(2.0,), (3.0,), (4.0,)]
    assert [d for d in out["dead"]] == [
        (
            "Pattern",
            "pattern: a partition key holds more than 3 open partial matches "
            "(CEP_PATTERN_MAX_PARTIALS); the oldest, which this event began, is dropped",
        )
    ] * 2
