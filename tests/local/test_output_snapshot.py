"""OUTPUT SNAPSHOT EVERY T on the reference executor: at every tick, every live group's current value,
changed or not (../shared/SIDDHI-SEMANTICS.md §4, "Snapshot", in event time; docs/language.md,
"Output rate limiting")."""

from __future__ import annotations

from output_helpers import STREAM, Timeline


def _ticks(
    t: Timeline, until: int, every: int, start: int | None = None
) -> dict[int, list[tuple[object, ...]]]:
    """The rows each tick sends, moving the watermark to every tick from `start` (default: the first)."""
    return {ms: t.wm(ms) for ms in range(start or every, until + 1, every)}


def test_with_group_by_each_tick_shows_every_live_group_and_a_group_whose_events_left_disappears() -> None:
    t = Timeline(
        "INSERT INTO o SELECT ip, sum(v) AS total FROM s WINDOW TIME SIZE 2 SECONDS ADVANCE 1 SECOND "
        "GROUP BY ip OUTPUT SNAPSHOT EVERY 500 MILLISECONDS;"
    )
    t.event(100, "a", 1)
    t.event(500, "b", 2)
    got = _ticks(t, 1500, 500)
    t.event(1500, "a", 3)  # at the watermark: not late, and after the tick at 1500
    got.update(_ticks(t, 4000, 500, start=2000))
    assert got[500] == []  # no window has ended yet
    assert got[1000] == got[1500] == [("a", 1), ("b", 2)]  # unchanged values come again
    assert got[2000] == got[2500] == [("a", 4), ("b", 2)]
    assert got[3000] == got[3500] == [("a", 3)]  # b's events all left; a's partly: the reduced sum
    assert got[4000] == []  # no group is live: no row, not a zero


def test_without_group_by_one_row_then_nothing_after_the_window_empties_until_a_new_row() -> None:
    t = Timeline(
        "INSERT INTO o SELECT sum(v) AS total FROM s WINDOW TIME SIZE 1 SECOND OUTPUT SNAPSHOT EVERY 1 SECOND;"
    )
    t.event(100, "x", 4)
    t.event(600, "x", 5)
    got = _ticks(t, 2000, 1000)
    t.event(2500, "x", 12)
    got[3000] = t.wm(3000)
    assert got == {1000: [(9,)], 2000: [], 3000: [(12,)]}  # Siddhi's [9], nothing, [12]


def test_a_window_ending_on_the_tick_is_in_that_ticks_snapshot() -> None:
    # Siddhi's tie rule: the snapshot due at a tick is taken before the expiry at that tick
    t = Timeline(
        "INSERT INTO o SELECT ip, count(*) AS n FROM s WINDOW TIME SIZE 2 SECONDS GROUP BY ip "
        "OUTPUT SNAPSHOT EVERY 2 SECONDS;"
    )
    t.event(0, ".5", 0)
    t.event(100, ".3", 0)
    assert t.wm(2000) == [(".5", 1), (".3", 1)]


def test_over_a_tuple_window_a_group_keeps_its_latest_value_and_groups_come_in_first_seen_order() -> None:
    t = Timeline(
        "INSERT INTO o SELECT ip, sum(v) AS total FROM s WINDOW TUPLE SIZE 2 GROUP BY ip "
        "OUTPUT SNAPSHOT EVERY 1 SECOND;"
    )
    for e in [(100, "b", 1), (200, "a", 1), (300, "b", 2), (400, "a", 2)]:
        t.event(*e)
    assert t.wm(1000) == [("b", 3), ("a", 3)]
    t.event(1100, "a", 5)
    t.event(1200, "a", 6)
    assert t.wm(2000) == [("b", 3), ("a", 11)]  # b's window never closes again: it keeps its value
    assert t.wm(3000) == [("b", 3), ("a", 11)]


def test_a_snapshot_row_is_not_shown_before_the_tick_after_its_window() -> None:
    t = Timeline(
        "INSERT INTO o SELECT count(*) AS n FROM s WINDOW TIME SIZE 1 SECOND OUTPUT SNAPSHOT EVERY 3 SECONDS;"
    )
    t.event(1500, "x", 0)
    assert t.wm(2999) == []
    assert t.wm(3000) == []  # the window [1000, 2000) ended, but [2000, 3000), the latest, is empty
    t.event(3500, "x", 0)
    assert t.wm(6000) == []  # [5000, 6000) is the latest window at 6000, and it is empty
    t.event(8200, "x", 0)
    t.event(8300, "x", 0)
    assert t.wm(9000) == [(2,)]


SLIDING = (
    "INSERT INTO o SELECT ip, count(*) AS n FROM s WINDOW TIME SIZE 1 SECOND GROUP BY ip "
    "OUTPUT SNAPSHOT EVERY 1 SECOND;"
)


def test_over_a_time_window_the_groups_come_in_the_order_of_their_first_event_in_it() -> None:
    # Siddhi shows a group where its oldest event still in the window is (its event list's order)
    t = Timeline(SLIDING)
    t.event(100, "a", 0)
    t.event(200, "b", 0)
    assert t.wm(1000) == [("a", 1), ("b", 1)]
    t.event(1100, "b", 0)
    t.event(1500, "a", 0)
    assert t.wm(2000) == [("b", 1), ("a", 1)]  # b came first in [1000, 2000), though a was seen first


def test_the_order_does_not_depend_on_how_far_the_watermark_moves_at_once() -> None:
    """Fuzzer seed 1204: a tick with no live group used to forget the groups' order, but only when
    no later row was pending, which depends on how far the watermark moved at once: event by event
    on the reference executor, a micro-batch at a time on Spark."""
    delayed = STREAM.replace("TIMESTAMP BY ts", "TIMESTAMP BY ts WATERMARK 5 SECONDS")
    events = [(100, "a", 0), (2100, "b", 0), (2200, "a", 0)]
    stepwise = Timeline(SLIDING, delayed)
    got = []
    for e in events:
        got += stepwise.event(*e)
        got += stepwise.wm(e[0])  # the watermark right behind each event
    got += stepwise.wm(3000)
    at_once = Timeline(SLIDING, delayed)
    assert [at_once.event(*e) for e in events] == [[], [], []]
    assert at_once.wm(3000) == got == [("a", 1), ("b", 1), ("a", 1)]  # [0, 1000); [2000, 3000): b first


def test_a_snapshot_kept_before_its_rows_had_their_place_goes_on_in_its_order() -> None:
    """A Spark checkpoint's limiter pickled before: its groups, (row, time) pairs, keep their order."""
    import pickle

    from deployer.output.snapshot import Snapshot

    before = Snapshot(1_000_000, (1_000_000, 1_000_000))
    before.__dict__.update(current={"b": (("b", 1), 999_999), "a": (("a", 1), 999_999)}, next_tick=1_000_000)
    del before.__dict__["arrived"]
    restored = pickle.loads(pickle.dumps(before))
    assert restored.tick(1_000_000) == [(("b", 1), 999_999), (("a", 1), 999_999)]
    restored.row("c", ("c", 1), 1_999_999)
    assert restored.tick(2_000_000) == [(("c", 1), 1_999_999)]  # b and a left their window
