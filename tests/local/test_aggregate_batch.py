"""Aggregate over BATCH windows: per group, from an event where START holds to one where STOP holds."""

from __future__ import annotations

BURST = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, duration integer;
CREATE WINDOW burst AS BATCH START duration > 600 STOP duration < 10;
INSERT INTO bursts SELECT idcaller, count(*) AS calls, sum(duration) AS total
  FROM cdr WINDOW burst GROUP BY idcaller;
"""


def test_start_and_stop_events_are_both_included(run) -> None:
    ex = run(
        BURST,
        [
            ("cdr", (1, 5)),  # no window open: belongs to none
            ("cdr", (1, 700)),  # opens caller 1's window
            ("cdr", (2, 900)),  # opens caller 2's window
            ("cdr", (1, 100)),
            ("cdr", (1, 800)),  # START holds again but a window is open: just appended
            ("cdr", (1, 3)),  # STOP: appended, fires, closes
            ("cdr", (1, 50)),  # no window open again
            ("cdr", (2, 20)),  # caller 2 never stops: never fires
        ],
    )
    assert ex.outputs["bursts"] == [(1, 4, 1603)]


def test_stop_is_not_tested_on_the_opening_event(run) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH marker boolean, v integer;
    INSERT INTO o SELECT count(*) AS n, sum(v) AS total FROM s WINDOW BATCH START marker STOP marker;
    """
    ex = run(
        script,
        [
            ("s", (True, 1)),  # opens
            ("s", (False, 2)),
            ("s", (True, 3)),  # closes: [1, 2, 3]
            ("s", (True, 4)),  # opens again
            ("s", (None, 5)),  # NULL STOP condition does not hold
            ("s", (True, 6)),  # closes: [4, 5, 6]
            ("s", (True, 7)),  # opens; the input ends: incomplete, never fires
        ],
    )
    assert ex.outputs["o"] == [(3, 6), (3, 15)]


def test_null_group_key_has_its_own_batch(run) -> None:
    ex = run(BURST, [("cdr", (None, 601)), ("cdr", (7, 601)), ("cdr", (None, 1)), ("cdr", (7, 42))])
    assert ex.outputs["bursts"] == [(None, 2, 602)]
