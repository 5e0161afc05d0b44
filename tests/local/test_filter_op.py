"""Filter: emits t when P(t) holds (is True: NULL drops the event like False)."""

from __future__ import annotations

SCRIPT = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, duration integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO paid SELECT * FROM cdr WHERE duration >= 10;
"""


def test_filter_keeps_only_true(run, ts) -> None:
    ex = run(
        SCRIPT,
        [
            ("cdr", (1, 30, ts(1))),
            ("cdr", (2, 9, ts(2))),
            ("cdr", (3, None, ts(3))),  # NULL >= 10 is unknown: dropped
            ("cdr", (4, 10, ts(4))),
        ],
    )
    assert ex.outputs["paid"] == [(1, 30, ts(1)), (4, 10, ts(4))]
    assert ex.stats.total_filtered == 2
    assert ex.stats.events_out["paid"] == 2


def test_three_valued_or_in_a_filter(run) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH a integer, b integer;
    INSERT INTO o SELECT * FROM s WHERE a > 0 OR b > 0;
    """
    # NULL OR TRUE = TRUE; NULL OR FALSE = NULL (dropped); NULL OR NULL = NULL (dropped)
    ex = run(script, [("s", (None, 1)), ("s", (None, -1)), ("s", (None, None)), ("s", (-1, -1))])
    assert ex.outputs["o"] == [(None, 1)]


def test_not_of_unknown_is_unknown(run) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH a integer;
    INSERT INTO o SELECT * FROM s WHERE NOT (a = 1);
    """
    ex = run(script, [("s", (1,)), ("s", (2,)), ("s", (None,))])
    assert ex.outputs["o"] == [(2,)]
