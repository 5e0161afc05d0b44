"""ALL EVERY duration over rows that do not come in time order (deployer/output/limiter.py `AllEvery`).

The reference executor hands a limiter its rows in time order; Spark, in that order per group of the
operator before it only (tests/fuzz/test_found_a_limit_after_partitions_that_run_apart.py): a row
may come behind a later one, and must still go out when its bucket closes, by time, then order key.
"""

from __future__ import annotations

from collections import deque

from deployer.output.limiter import AllEvery

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
    assert not limiter.unordered
    assert limiter.tick(3 * S) == [((0,), S), ((1,), S), ((2,), 2 * S)]
    assert limiter.due() == 4 * S


def test_a_limiter_kept_by_an_earlier_version_reads_on() -> None:
    """A checkpoint's limiter pickled before rows kept their order key: (row, time) pairs, and no
    `unordered` of its own."""
    limiter = AllEvery.__new__(AllEvery)
    limiter.__dict__.update({"every": S, "pending": deque([(("a",), S), (("b",), 2 * S)])})
    limiter.row((), ("c",), S + 1, "x")  # behind the latest
    assert limiter.tick(3 * S) == [(("a",), S), (("c",), S + 1), (("b",), 2 * S)]
