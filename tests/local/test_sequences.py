"""Sequences (`,`) on the reference executor: ../shared/SIDDHI-SEMANTICS.md §2, each with the events
of the Siddhi test it was read off (SequenceTestCase), in event time."""

from __future__ import annotations

from pattern_helpers import rows


def test_the_very_next_event_must_fit() -> None:
    stmt = "INSERT INTO o SELECT e1.symbol AS s1, e2.symbol AS s2 FROM SEQUENCE e1=a[price > 20], e2=b[price > e1.price];"
    assert rows(stmt, [("a", 0, "WSO2", 55.6), ("b", 1, "IBM", 55.7)]) == [("WSO2", "IBM")]
    # an event of any stream the query reads in between breaks it, as does one failing the filter
    assert rows(stmt, [("a", 0, "WSO2", 55.6), ("a", 1, "X", 1.0), ("b", 2, "IBM", 55.7)]) == []
    assert rows(stmt, [("a", 0, "WSO2", 55.6), ("b", 1, "LOW", 1.0), ("b", 2, "IBM", 55.7)]) == []


def test_every_keeps_one_partial_per_step_so_a_newer_first_event_replaces_the_waiting_one() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS s1, e2.symbol AS s2 FROM SEQUENCE EVERY e1=a[price > 20], e2=b[price > e1.price];",
        [("a", 0, "WSO2", 55.6), ("a", 1, "GOOG", 57.6), ("b", 2, "IBM", 65.7)],
    )
    assert got == [("GOOG", "IBM")]


def test_the_event_that_completes_a_match_also_starts_the_next() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.price AS p1, e2.price AS p2 FROM SEQUENCE EVERY e1=a, e2=a[price > e1.price];",
        [("a", 0, "A", 1.0), ("a", 1, "A", 2.0), ("a", 2, "A", 3.0)],
    )
    assert got == [(1.0, 2.0), (2.0, 3.0)]


def test_an_event_that_extends_a_partial_does_not_also_start_one() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.price AS p1, e2.price AS p2, e3.symbol AS s FROM SEQUENCE "
        "EVERY e1=a, e2=a, e3=b;",
        [("a", 0, "A", 1.0), ("a", 1, "A", 2.0), ("b", 2, "B", 0.0)],
    )
    assert got == [(1.0, 2.0, "B")]


def test_a_trailing_star_emits_at_once_with_nothing_collected() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS s, e2[0].price AS p0 FROM SEQUENCE EVERY e1=a[price > 20], e2=b[price > e1.price]*;",
        [("a", 0, "WSO2", 55.6), ("a", 1, "IBM", 55.7)],
    )
    assert got == [("WSO2", None), ("IBM", None)]


def test_a_leading_star_with_nothing_collected_reads_null() -> None:
    got = rows(
        "INSERT INTO o SELECT e1[0].price AS p0, e2.price AS p2 FROM SEQUENCE "
        "EVERY e1=b[price > 20]*, e2=a[price > e1[0].price];",
        [("a", 0, "WSO2", 59.6), ("b", 1, "WSO2", 55.6), ("b", 2, "IBM", 55.7), ("a", 3, "WSO2", 57.6)],
    )
    assert got == [(55.6, 57.6)]


def test_plus_is_greedy_and_the_first_event_fitting_the_next_step_closes_it() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.price AS start, e2[last].price AS top, e3.price AS fall, count(e2.price) AS n "
        "FROM SEQUENCE EVERY e1=a, e2=a[price > e2[last].price OR e2[last].price IS NULL]+, "
        "e3=a[price < e2[last].price];",
        [
            ("a", 0, "A", 10.0),
            ("a", 1, "A", 11.0),
            ("a", 2, "A", 12.0),
            ("a", 3, "A", 13.0),
            ("a", 4, "A", 9.0),
        ],
    )
    assert (10.0, 13.0, 9.0, 3) in got


def test_question_mark_takes_at_most_one() -> None:
    stmt = "INSERT INTO o SELECT e1.symbol AS s, count(e2.price) AS n, e3.symbol AS t FROM SEQUENCE e1=a, e2=b?, e3=c;"
    assert rows(stmt, [("a", 0, "A", 1.0), ("b", 1, "B", 1.0), ("c", 2, "C", 1.0)]) == [("A", 1, "C")]
    assert rows(stmt, [("a", 0, "A", 1.0), ("c", 1, "C", 1.0)]) == [("A", 0, "C")]
    assert rows(stmt, [("a", 0, "A", 1.0), ("b", 1, "B", 1.0), ("b", 2, "B", 1.0), ("c", 3, "C", 1.0)]) == []


def test_or_is_one_step_whose_sides_may_come_from_either_stream() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.price AS p1, e2.price AS p2, e3.symbol AS s3 FROM SEQUENCE "
        "EVERY e1=b[price > 20], e2=b[price > e1.price] OR e3=b[symbol = 'IBM'];",
        [("b", 0, "WSO2", 59.6), ("b", 1, "WSO2", 55.6), ("b", 2, "IBM", 55.7), ("b", 3, "WSO2", 57.6)],
    )
    assert got == [(55.6, 55.7, None), (55.7, 57.6, None)]


def test_without_every_a_sequence_matches_once() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.price AS p1 FROM SEQUENCE e1=a, e2=b;",
        [("a", 0, "A", 1.0), ("b", 1, "B", 1.0), ("a", 2, "A", 2.0), ("b", 3, "B", 1.0)],
    )
    assert got == [(1.0,)]
