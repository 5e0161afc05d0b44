"""Absence (`NOT s[c] FOR d`, `NOT s[c] AND b`) on the reference executor: ../shared/SIDDHI-SEMANTICS.md
§3, each with the events of the Siddhi test it was read off, in event time: a deadline is decided
when the watermark passes it, so each case ends with an event that moves the watermark (`LATER`,
which fits no step)."""

from __future__ import annotations

from typing import Any

from pattern_helpers import rows


def times(stmt: str, events: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows, with the match time (the last column, `t`) in milliseconds after T0."""
    out = []
    for r in rows(stmt, events):
        *values, t = r
        out.append((*values, round(t.timestamp() * 1000) - 1767225600000))
    return out


TRAILING = (
    "INSERT INTO o SELECT e1.symbol AS s, match_time() AS t FROM PATTERN "
    "e1=a -> NOT b[price > 10] FOR 1 SECOND WHERE e1.symbol <> 'LATER';"
)


def test_a_trailing_absence_fires_its_wait_after_the_step() -> None:
    stmt = TRAILING.replace("e1=a", "e1=a[symbol <> 'LATER']")
    # the deadline is decided by the watermark: the LATER event (on a stream the pattern reads) moves it
    assert times(stmt, [("a", 1100, "A", 1.0), ("a", 9000, "LATER", 0.0)]) == [("A", 2100)]
    # a B fitting its condition inside the wait cancels; one that does not fit does not
    assert times(stmt, [("a", 0, "A", 1.0), ("b", 500, "B", 20.0), ("a", 9000, "LATER", 0.0)]) == []
    assert times(stmt, [("a", 0, "A", 1.0), ("b", 500, "B", 5.0), ("a", 9000, "LATER", 0.0)]) == [("A", 1000)]
    # at the deadline itself it comes too late to cancel
    assert times(stmt, [("a", 0, "A", 1.0), ("b", 1000, "B", 20.0), ("a", 9000, "LATER", 0.0)]) == [
        ("A", 1000)
    ]


def test_a_deadline_the_watermark_never_passes_never_fires() -> None:
    stmt = TRAILING.replace("e1=a", "e1=a[symbol <> 'LATER']")
    assert times(stmt, [("a", 0, "A", 1.0), ("a", 900, "LATER", 0.0)]) == []


def test_every_step_before_an_absence_has_its_own_deadline_and_one_event_cancels_all_it_fits() -> None:
    stmt = (
        "INSERT INTO o SELECT e1.symbol AS s, match_time() AS t FROM PATTERN "
        "EVERY e1=a[symbol <> 'LATER'] -> NOT b[symbol = e1.symbol] FOR 1 SECOND;"
    )
    got = times(stmt, [("a", 0, "X", 1.0), ("a", 100, "Y", 1.0), ("a", 9000, "LATER", 0.0)])
    assert got == [("X", 1000), ("Y", 1100)]
    got = times(
        stmt, [("a", 0, "X", 1.0), ("a", 100, "X", 1.0), ("b", 500, "X", 1.0), ("a", 9000, "LATER", 0.0)]
    )
    assert got == []


def test_a_middle_absence_needs_the_next_step_after_its_wait() -> None:
    stmt = (
        "INSERT INTO o SELECT e1.symbol AS s, e2.symbol AS s2 FROM PATTERN "
        "e1=a -> NOT b FOR 1 SECOND -> e2=c;"
    )
    assert rows(stmt, [("a", 0, "A", 1.0), ("c", 500, "EARLY", 1.0), ("c", 1500, "ON", 1.0)]) == [("A", "ON")]
    assert rows(stmt, [("a", 0, "A", 1.0), ("b", 500, "B", 1.0), ("c", 1500, "ON", 1.0)]) == []


def test_a_leading_absence_counts_from_the_keys_first_event_and_a_fitting_event_starts_it_again() -> None:
    stmt = "INSERT INTO o SELECT e2.symbol AS s FROM PATTERN NOT a[price > 10] FOR 1 SECOND -> e2=b;"
    assert rows(stmt, [("a", 0, "QUIET", 1.0), ("b", 1100, "B", 1.0)]) == [("B",)]
    assert rows(stmt, [("a", 100, "A", 20.0), ("b", 2200, "B", 1.0)]) == [("B",)]
    assert rows(stmt, [("a", 0, "A", 20.0), ("b", 500, "EARLY", 1.0), ("b", 1100, "B", 1.0)]) == [("B",)]
    # A's less than the wait apart keep it from holding
    got = rows(stmt, [("a", 0, "A", 20.0), ("a", 800, "A", 20.0), ("b", 1500, "B", 1.0)])
    assert got == []
    # without EVERY, only the first B after the absence matches
    assert rows(stmt, [("a", 0, "Q", 1.0), ("b", 1100, "B", 1.0), ("b", 1200, "B2", 1.0)]) == [("B",)]


def test_every_absence_fires_every_wait_until_a_fitting_event() -> None:
    stmt = (
        "INSERT INTO o SELECT e1.symbol AS s, match_time() AS t FROM PATTERN "
        "e1=a[symbol = 'A'] -> EVERY NOT b[price > 10] FOR 1 SECOND;"
    )
    assert times(stmt, [("a", 0, "A", 1.0), ("a", 3200, "LATER", 0.0)]) == [
        ("A", 1000),
        ("A", 2000),
        ("A", 3000),
    ]
    got = times(stmt, [("a", 0, "A", 1.0), ("b", 2500, "B", 20.0), ("a", 9000, "LATER", 0.0)])
    assert got == [("A", 1000), ("A", 2000)]


def test_within_stops_an_every_absence() -> None:
    stmt = (
        "INSERT INTO o SELECT e1.symbol AS s, match_time() AS t FROM PATTERN "
        "e1=a[symbol = 'A'] -> EVERY NOT b FOR 900 MILLISECONDS WITHIN 2 SECONDS;"
    )
    assert times(stmt, [("a", 0, "A", 1.0), ("a", 9000, "LATER", 0.0)]) == [("A", 900), ("A", 1800)]


def test_a_leading_every_absence_leaves_a_partial_per_firing_and_one_event_completes_them() -> None:
    stmt = "INSERT INTO o SELECT e2.symbol AS s FROM PATTERN EVERY NOT a[price > 10] FOR 1 SECOND -> e2=b;"
    got = rows(stmt, [("a", 0, "QUIET", 1.0), ("b", 2100, "B", 1.0), ("b", 2200, "B2", 1.0)])
    assert got == [("B",), ("B",)]


def test_not_for_and_a_step_needs_both() -> None:
    stmt = (
        "INSERT INTO o SELECT e1.symbol AS s, e2.symbol AS s2, match_time() AS t FROM PATTERN "
        "e1=a[symbol = 'A'] -> NOT b FOR 1 SECOND AND e2=c;"
    )
    # the step inside the wait: the match when the wait has passed
    assert times(stmt, [("a", 0, "A", 1.0), ("c", 500, "C", 1.0), ("a", 9000, "LATER", 0.0)]) == [
        ("A", "C", 1000)
    ]
    assert times(stmt, [("a", 0, "A", 1.0), ("c", 1100, "C", 1.0)]) == [("A", "C", 1100)]
    assert (
        times(
            stmt, [("a", 0, "A", 1.0), ("b", 300, "B", 1.0), ("c", 500, "C", 1.0), ("a", 9000, "LATER", 0.0)]
        )
        == []
    )


def test_not_for_or_a_step_takes_the_first() -> None:
    stmt = (
        "INSERT INTO o SELECT e1.symbol AS s, e2.symbol AS s2, match_time() AS t FROM PATTERN "
        "e1=a[symbol = 'A'] -> NOT b FOR 1 SECOND OR e2=c;"
    )
    assert times(stmt, [("a", 0, "A", 1.0), ("c", 500, "C", 1.0), ("a", 9000, "LATER", 0.0)]) == [
        ("A", "C", 500)
    ]
    assert times(stmt, [("a", 0, "A", 1.0), ("a", 9000, "LATER", 0.0)]) == [("A", None, 1000)]
    # a B cancels the absent side only: the step may still come
    got = times(
        stmt, [("a", 0, "A", 1.0), ("b", 300, "B", 1.0), ("c", 1500, "C", 1.0), ("a", 9000, "LATER", 0.0)]
    )
    assert got == [("A", "C", 1500)]


def test_not_and_a_step_without_for() -> None:
    stmt = "INSERT INTO o SELECT e2.symbol AS s FROM PATTERN EVERY (NOT a[symbol = 'X'] AND e2=b);"
    got = rows(
        stmt, [("b", 0, "IBM", 1.0), ("a", 10, "X", 1.0), ("b", 20, "SPOILED", 1.0), ("b", 30, "ORACLE", 1.0)]
    )
    assert got == [("IBM",), ("ORACLE",)]
    # Siddhi's own case: X spoils IBM, ORACLE matches
    got = rows(stmt, [("a", 0, "X", 1.0), ("b", 10, "IBM", 1.0), ("b", 20, "ORACLE", 1.0)])
    assert got == [("ORACLE",)]
    # without EVERY, the spoiled one is the only one
    once = stmt.replace("EVERY (NOT a[symbol = 'X'] AND e2=b)", "NOT a[symbol = 'X'] AND e2=b")
    assert rows(once, [("a", 0, "X", 1.0), ("b", 10, "IBM", 1.0), ("b", 20, "ORACLE", 1.0)]) == []


def test_a_sequence_trailing_absence_and_only_the_latest_first_event_waits() -> None:
    stmt = (
        "INSERT INTO o SELECT e1.symbol AS s, match_time() AS t FROM SEQUENCE "
        "EVERY e1=a[symbol <> 'LATER'], NOT b FOR 1 SECOND;"
    )
    got = times(stmt, [("a", 0, "WSO2", 1.0), ("a", 100, "GOOG", 1.0), ("a", 9000, "LATER", 0.0)])
    assert got == [("GOOG", 1100)]


def test_a_sequence_middle_absence_and_the_next_event_after_it() -> None:
    stmt = (
        "INSERT INTO o SELECT e1.symbol AS s, e2.symbol AS s2 FROM SEQUENCE e1=a, NOT x FOR 1 SECOND, e2=b;"
    )
    assert rows(stmt, [("a", 0, "A", 1.0), ("b", 1100, "B", 1.0)]) == [("A", "B")]
    assert rows(stmt, [("a", 0, "A", 1.0), ("x", 500, "X", 1.0), ("b", 1100, "B", 1.0)]) == []
