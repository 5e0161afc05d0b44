"""ALL and LAST EVERY duration over rows that do not come in time order (deployer/output/limiter.py
`AllEvery`, `LastEvery`).

The reference executor hands a limiter its rows in time order; Spark, in that order per group of the
operator before it only (tests/fuzz/test_found_a_limit_after_partitions_that_run_apart.py): a row
may come behind a later one, and must still go out when its bucket closes, by time, then order key;
LAST keeps the latest by time and order key, not the one that came last.
"""

from __future__ import annotations

import pickle
from collections import deque

from deployer.output.limiter import AllEvery, LastEvery

S = 1_000_000  # a second, in µs


def test_a_row_behind_a_later_one_goes_out_when_its_bucket_closes() -> None:
    limiter = AllEvery(S)
    limiter.row((), ("a",), 5 * S, "05")
    limiter.row((), ("far",), 3600 * S, "99")  # a partition whose events ran ahead
    limiter.row((), ("b",), 5 * S + S // 4, "06")  # another's, behind it
    assert limiter.due() == 6 * S  # the earliest held row's bucket, not the first held row's
    assert limiter.tick(7 * S) == [(("a",), 5 * S), (("b",), 5 * S + S // 4)]
    assert limiter.due() == 3601 * S
    assert limiter.tick(3600 * S) == []  # its bucket is not closed yet
    assert limiter.tick(3601 * S) == [(("far",), 3600 * S)]
    assert limiter.due() is None


def test_rows_at_one_time_go_out_by_their_order_key() -> None:
    limiter = AllEvery(S)
    limiter.row((), ("late",), 9 * S, "2|9")
    limiter.row((), ("event",), 5 * S, "1|1|x")
    limiter.row((), ("deadline",), 5 * S, "1|0|y")  # a deadline's match sorts first at its time
    assert limiter.tick(10 * S) == [(("deadline",), 5 * S), (("event",), 5 * S), (("late",), 9 * S)]


def test_rows_in_time_order_go_out_as_they_came() -> None:
    limiter = AllEvery(S)
    for i, t in enumerate([1, 1, 2, 3]):
        limiter.row((), (i,), t * S, "")
    assert limiter.tick(3 * S) == [((0,), S), ((1,), S), ((2,), 2 * S)]
    assert limiter.due() == 4 * S


def test_a_limiter_kept_by_an_earlier_version_reads_on() -> None:
    """A checkpoint's limiter pickled before rows had a rank: `pending` in arrival order, of
    (row, time) pairs or (row, time, order key) triples with an `unordered` flag."""
    for pending, flag in (
        ([(("a",), S), (("b",), 2 * S)], {}),
        ([(("a",), S, "1"), (("b",), 2 * S, "2")], {"unordered": False}),
    ):
        old = AllEvery.__new__(AllEvery)
        old.__dict__.update({"every": S, "pending": deque(pending), **flag})
        limiter = pickle.loads(pickle.dumps(old))
        limiter.row((), ("c",), S + 1, "x")  # behind the latest
        assert limiter.due() == 2 * S
        assert limiter.tick(3 * S) == [(("a",), S), (("c",), S + 1), (("b",), 2 * S)]
        assert limiter.due() is None


def test_last_keeps_the_latest_row_not_the_one_that_came_last() -> None:
    limiter = LastEvery(S)
    limiter.row(("g",), ("later",), 5 * S + S // 2, "2")
    limiter.row(("h",), ("h",), 5 * S + S // 4, "1")
    limiter.row(("g",), ("earlier",), 5 * S + S // 8, "0")  # another partition's, behind it
    limiter.row(("g",), ("same time, before",), 5 * S + S // 2, "1")  # equal time: the order key decides
    # the groups by their first row: g's came at 5.125 s, h's at 5.25 s
    assert limiter.tick(6 * S) == [(("later",), 5 * S + S // 2), (("h",), 5 * S + S // 4)]


def test_last_at_one_time_keeps_the_row_that_came_last() -> None:
    """On the reference executor rows have no order key: at one time, the last to come is the latest."""
    limiter = LastEvery(S)
    for name in ("a", "b", "c"):
        limiter.row((), (name,), 5 * S, "")
    assert limiter.tick(6 * S) == [(("c",), 5 * S)]


def test_a_last_limiter_kept_by_an_earlier_version_reads_on() -> None:
    """Pickled before: each bucket's groups as (row, time), in the order they first came."""
    old = LastEvery.__new__(LastEvery)
    old.__dict__.update(
        {"every": S, "buckets": {5: {("h",): (("h",), 5 * S + 9), ("g",): (("g",), 5 * S + 8)}}}
    )
    limiter = pickle.loads(pickle.dumps(old))
    limiter.row(("g",), ("g2",), 5 * S + 7, "0")  # earlier than g's kept row: not the latest
    limiter.row(("h",), ("h2",), 5 * S + 10, "0")
    limiter.row(("i",), ("i",), 5 * S + 1, "0")  # a new group: after the ones that came before
    assert limiter.tick(6 * S) == [(("h2",), 5 * S + 10), (("g",), 5 * S + 8), (("i",), 5 * S + 1)]
