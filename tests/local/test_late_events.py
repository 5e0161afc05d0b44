"""Event-time order at the sources: buffering, the watermark, late events counted and dead-lettered."""

from __future__ import annotations

SCRIPT = """
CREATE STREAMSCHEMA s WITH id integer, t timestamp TIMESTAMP BY t WATERMARK 2 SECONDS;
INSERT INTO o SELECT id FROM s;
"""


def test_events_are_released_in_event_time_order_and_late_ones_dropped(run, ts) -> None:
    ex = run(
        SCRIPT,
        [
            ("s", (1, ts(10))),  # watermark 8
            ("s", (2, ts(9))),  # 9 >= 8: on time, reordered before 10
            ("s", (3, ts(7))),  # 7 < 8: late
            ("s", (4, ts(8))),  # exactly the watermark: on time
            ("s", (5, ts(10))),  # a tie with id 1: arrival order
        ],
    )
    assert ex.outputs["o"] == [(4,), (2,), (1,), (5,)]
    assert ex.stats.events_in == {"s": 5}
    assert ex.stats.late == {"s": 1}
    assert ex.stats.dead_lettered == {}  # late events are counted as late, not as errors
    [dl] = ex.dead_letters
    assert dl.stage == "late" and dl.event == (3, ts(7)) and dl.stream == "s"
    assert "behind the watermark 2026-01-01T00:00:08Z" in dl.reason


def test_nothing_is_released_before_the_watermark_passes(run, ts) -> None:
    ex = run(SCRIPT, [("s", (1, ts(10))), ("s", (2, ts(11)))], finish=False)
    assert ex.outputs["o"] == []  # watermark 9
    ex.push("s", (3, ts(13)))  # watermark 11: releases ts 10 only (11 is not < 11)
    assert ex.outputs["o"] == [(1,)]
    ex.finish()
    assert ex.outputs["o"] == [(1,), (2,), (3,)]


def test_chunking_does_not_change_results(run, ts) -> None:
    events = [("s", (i, ts(t))) for i, t in enumerate([5, 3, 9, 8, 1, 12, 11, 10, 20, 2, 19])]
    whole = run(SCRIPT, events)
    stepwise = run(SCRIPT, [], finish=False)
    for e in events:
        stepwise.push(*e)
        stepwise.advance_watermark("s", ts(0))  # a no-op promise must not change anything
    stepwise.finish()
    assert whole.outputs == stepwise.outputs
    assert whole.stats.late == stepwise.stats.late == {"s": 2}  # ts 1 and 2 are behind 3 and 10


def test_null_event_time_is_dead_lettered(run, ts) -> None:
    ex = run(SCRIPT, [("s", (1, None)), ("s", (2, ts(1)))])
    assert ex.outputs["o"] == [(2,)]
    [dl] = ex.dead_letters
    assert dl.stage == "Source" and "NULL" in dl.reason


def test_push_after_end_is_an_error(run, ts) -> None:
    import pytest

    ex = run(SCRIPT, [])
    with pytest.raises(ValueError, match="has ended"):
        ex.push("s", (1, ts(1)))


def test_naive_and_non_utc_timestamps_are_normalised_to_utc(run, ts) -> None:
    from datetime import timedelta, timezone

    naive = ts(1).replace(tzinfo=None)
    plus_one = ts(2).astimezone(timezone(timedelta(hours=1)))
    script = """
    CREATE STREAMSCHEMA s WITH id integer, t timestamp TIMESTAMP BY t;
    INSERT INTO o SELECT id, t, hour(t) AS h FROM s WHERE t > '2025-12-31';
    """
    ex = run(script, [("s", (1, naive)), ("s", (2, plus_one))])
    assert ex.outputs["o"] == [(1, ts(1), 0), (2, ts(2), 0)]
    assert all(e[1].tzinfo is not None for e in ex.outputs["o"])
