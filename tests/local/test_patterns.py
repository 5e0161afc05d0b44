"""Patterns (`->`) on the reference executor: the rules of ../shared/SIDDHI-SEMANTICS.md §1, each with
the events of the Siddhi test it was read off, in event time (docs/language.md, "Patterns")."""

from __future__ import annotations

from pattern_helpers import rows


def test_a_partial_takes_the_first_later_event_that_fits_and_events_in_between_are_skipped() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS a, e2.symbol AS b FROM PATTERN e1=a[price > 20] -> e2=b[price > e1.price];",
        [("a", 0, "WSO2", 55.6), ("b", 10, "X", 10.0), ("b", 20, "IBM", 55.7), ("b", 30, "GOOG", 60.0)],
    )
    assert got == [("WSO2", "IBM")]  # without EVERY, one match; X does not fit and is skipped


def test_every_starts_a_partial_at_each_fitting_event_and_one_event_completes_several() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS a, e2.symbol AS b FROM PATTERN EVERY e1=a[price > 20] "
        "-> e2=b[price > e1.price];",
        [("a", 0, "WSO2", 55.6), ("a", 10, "GOOG", 55.6), ("b", 20, "IBM", 55.7)],
    )
    assert got == [("WSO2", "IBM"), ("GOOG", "IBM")]  # oldest partial first


def test_events_are_shared_not_consumed() -> None:
    # one A event is e1 of a new partial and e2 of an older one
    got = rows(
        "INSERT INTO o SELECT e1.price AS p1, e2.price AS p2 FROM PATTERN EVERY e1=a -> e2=a[price > e1.price];",
        [("a", 0, "A", 1.0), ("a", 10, "A", 2.0), ("a", 20, "A", 3.0)],
    )
    assert got == [(1.0, 2.0), (2.0, 3.0)]


def test_within_one_partial_an_event_fills_at_most_one_step() -> None:
    got = rows(
        "INSERT INTO o SELECT e4.price AS p4, e1.price AS p1, e3.price AS p3 FROM PATTERN "
        "e4=a[symbol = 'MSFT'] -> EVERY (e1=a -> e3=a);",
        [
            ("a", 0, "MSFT", 50.0),
            ("a", 1, "X", 55.6),
            ("a", 2, "X", 57.6),
            ("a", 3, "X", 54.0),
            ("a", 4, "X", 53.6),
        ],
    )
    assert got == [(50.0, 55.6, 57.6), (50.0, 54.0, 53.6)]


def test_every_group_rearms_after_it_completes_and_matches_do_not_overlap() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.price AS p1, e3.price AS p3, e2.price AS p2 FROM PATTERN "
        "EVERY (e1=a -> e3=a) -> e2=b[price > e1.price];",
        [
            ("a", 0, "A", 55.6),
            ("a", 1, "A", 54.0),
            ("a", 2, "A", 53.6),
            ("a", 3, "A", 53.0),
            ("b", 4, "B", 57.7),
        ],
    )
    assert got == [(55.6, 54.0, 57.7), (53.6, 53.0, 57.7)]


def test_a_count_collects_until_the_next_step_and_an_event_fitting_both_goes_to_the_next_step() -> None:
    got = rows(
        "INSERT INTO o SELECT e1[0].price AS first, e1[last].price AS last, count(e1.price) AS n, e2.price AS p2 "
        "FROM PATTERN e1=a[price > 20]<2:5> -> e2=a[price > 50];",
        [("a", 0, "A", 25.0), ("a", 1, "A", 30.0), ("a", 2, "A", 40.0), ("a", 3, "A", 60.0)],
    )
    assert got == [(25.0, 40.0, 3, 60.0)]


def test_the_next_step_waits_for_the_minimum_and_early_events_do_not_reset() -> None:
    got = rows(
        "INSERT INTO o SELECT count(e1.price) AS n, e2.symbol AS s FROM PATTERN e1=a<2:> -> e2=b;",
        [("a", 0, "A", 1.0), ("b", 1, "EARLY", 1.0), ("a", 2, "A", 1.0), ("b", 3, "ON", 1.0)],
    )
    assert got == [(2, "ON")]


def test_a_count_with_min_zero_lets_the_next_step_complete_with_nothing_collected() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS s, e2[0].price AS first, count(e2.price) AS n, e3.symbol AS t "
        "FROM PATTERN e1=a -> e2=b<0:3> -> e3=c;",
        [("a", 0, "A", 1.0), ("c", 1, "C", 1.0)],
    )
    assert got == [("A", None, 0, "C")]


def test_a_count_as_the_last_step_emits_once_at_its_minimum() -> None:
    got = rows(
        "INSERT INTO o SELECT e2[0].price AS p0, e2[3].price AS p3, e2[4].price AS p4 FROM PATTERN "
        "e1=a -> e2=b<4:6>;",
        [("a", 0, "A", 1.0)] + [("b", i, "B", float(i)) for i in range(1, 8)],
    )
    assert got == [(1.0, 4.0, None)]


def test_every_on_a_count_rearms_at_the_count() -> None:
    got = rows(
        "INSERT INTO o SELECT e1[0].price AS p0, e1[1].price AS p1 FROM PATTERN EVERY e1=a<2>;",
        [("a", i, "A", float(i)) for i in range(5)],
    )
    assert got == [(0.0, 1.0), (2.0, 3.0)]


def test_or_takes_the_first_of_either_and_the_left_when_one_event_fits_both() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS s1, e2.symbol AS s2, e3.symbol AS s3 FROM PATTERN "
        "EVERY e1=a -> e2=b[price > 50] OR e3=b[symbol = 'IBM'];",
        [("a", 0, "WSO2", 1.0), ("b", 1, "IBM", 57.7), ("a", 2, "GOOG", 1.0), ("b", 3, "IBM", 10.0)],
    )
    assert got == [("WSO2", "IBM", None), ("GOOG", None, "IBM")]


def test_and_needs_both_in_either_order_and_one_event_can_bind_both() -> None:
    got = rows(
        "INSERT INTO o SELECT e2.price AS p2, e3.price AS p3 FROM PATTERN "
        "EVERY e1=a -> e2=b[price > 50] AND e3=b[symbol = 'WSO2'];",
        [
            ("a", 0, "A", 1.0),
            ("b", 1, "WSO2", 72.7),
            ("a", 2, "A", 1.0),
            ("b", 3, "WSO2", 10.0),
            ("b", 4, "X", 60.0),
        ],
    )
    assert got == [(72.7, 72.7), (60.0, 10.0)]


def test_within_counts_from_the_first_event_and_a_gap_equal_to_the_bound_still_matches() -> None:
    stmt = "INSERT INTO o SELECT e1.symbol AS s FROM PATTERN EVERY e1=a -> e2=b WITHIN 1 SECOND;"
    assert rows(stmt, [("a", 0, "EXACT", 1.0), ("b", 1000, "B", 1.0)]) == [("EXACT",)]
    assert rows(stmt, [("a", 0, "LATE", 1.0), ("b", 1001, "B", 1.0)]) == []


def test_each_partial_is_timed_on_its_own() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS s FROM PATTERN EVERY e1=a -> e2=b WITHIN 2 SECONDS;",
        [("a", 0, "OLD", 1.0), ("a", 1200, "NEW", 1.0), ("b", 2700, "B", 1.0)],
    )
    assert got == [("NEW",)]


def test_an_every_group_starts_again_when_within_expires_it() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS s FROM PATTERN EVERY (e1=a -> e2=b) WITHIN 1 SECOND;",
        [("a", 0, "GONE", 1.0), ("a", 500, "IGNORED", 1.0), ("a", 1500, "AGAIN", 1.0), ("b", 1600, "B", 1.0)],
    )
    assert got == [("AGAIN",)]


def test_partitions_keep_one_automaton_per_key() -> None:
    got = rows(
        "INSERT INTO o SELECT e1.symbol AS s, e2.price AS p FROM PATTERN e1=a -> e2=b PARTITION BY symbol;",
        [("a", 0, "X", 1.0), ("a", 1, "Y", 1.0), ("b", 2, "Y", 2.0), ("b", 3, "X", 3.0), ("b", 4, "X", 4.0)],
    )
    assert sorted(got) == [("X", 3.0), ("Y", 2.0)]


def test_the_where_filters_the_matches_and_match_time_is_the_completing_events() -> None:
    out = rows(
        "INSERT INTO o SELECT e1.price AS p1, match_time() AS t FROM PATTERN EVERY e1=a -> e2=b "
        "WHERE e2.price > e1.price;",
        [("a", 0, "A", 5.0), ("b", 1000, "B", 1.0), ("a", 2000, "A", 1.0), ("b", 3000, "B", 2.0)],
    )
    assert [(p, t.second) for p, t in out] == [(1.0, 3)]
