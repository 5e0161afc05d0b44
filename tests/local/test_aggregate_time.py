"""Aggregate over TIME windows: epoch-aligned hopping windows fired by the watermark."""

from __future__ import annotations

from decimal import Decimal


def script(window: str, select: str = "k, count(*) AS n", watermark: str = "", v: str = "integer") -> str:
    return f"""
    CREATE STREAMSCHEMA s WITH k varchar, v {v}, t timestamp TIMESTAMP BY t {watermark};
    INSERT INTO o SELECT {select} FROM s WINDOW {window} GROUP BY k;
    """


def test_hopping_windows_fire_in_end_order_as_the_watermark_passes(run, ts) -> None:
    ex = run(script("TIME SIZE 10 SECONDS ADVANCE 5 SECONDS"), finish=False)
    ex.push("s", ("a", 0, ts(1)))  # in [-5, 5) and [0, 10)
    assert ex.outputs["o"] == []
    ex.push("s", ("b", 0, ts(6)))  # in [0, 10) and [5, 15); watermark 6 closes [-5, 5)
    assert ex.outputs["o"] == [("a", 1)]
    ex.push("s", ("a", 0, ts(12)))  # in [5, 15) and [10, 20); watermark 12 closes [0, 10)
    assert ex.outputs["o"] == [("a", 1), ("a", 1), ("b", 1)]
    ex.push("s", ("a", 0, ts(21)))  # in [15, 25) and [20, 30); closes [5, 15) and [10, 20)
    ex.finish()  # final time 21: [15, 25) and [20, 30) are incomplete and never fire
    assert ex.outputs["o"] == [
        ("a", 1),  # [-5, 5)
        ("a", 1),  # [0, 10): groups in order of first appearance in the window
        ("b", 1),
        ("b", 1),  # [5, 15)
        ("a", 1),
        ("a", 1),  # [10, 20)
    ]


def test_several_windows_closing_at_once_keep_end_then_first_appearance_order(run, ts) -> None:
    ex = run(
        script("TIME SIZE 10 SECONDS", "k, sum(v) AS total"),
        [
            ("s", ("b", 1, ts(1))),
            ("s", ("a", 2, ts(2))),
            ("s", ("a", 3, ts(11))),
            ("s", ("c", 4, ts(12))),
            ("s", ("b", 5, ts(13))),
            ("s", ("b", 6, ts(3))),  # late: the watermark is already 13
            ("s", ("x", 0, ts(40))),  # closes [0, 10) and [10, 20); [40, 50) never completes
        ],
    )
    assert ex.outputs["o"] == [("b", 1), ("a", 2), ("a", 3), ("c", 4), ("b", 5)]
    assert ex.stats.late == {"s": 1}


def test_equal_timestamps_and_the_window_end_boundary(run, ts) -> None:
    ex = run(
        script("TIME SIZE 10 SECONDS"),
        [
            ("s", ("a", 0, ts(5))),
            ("s", ("a", 0, ts(5))),
            ("s", ("a", 0, ts(5))),
            ("s", ("a", 0, ts(10))),  # the end is exclusive: this is in [10, 20)
            ("s", ("a", 0, ts(10))),
            ("s", ("a", 0, ts(20))),  # final time 20 = the end of [10, 20): complete, it fires
        ],
    )
    assert ex.outputs["o"] == [("a", 3), ("a", 2)]


def test_incomplete_last_window_never_fires_and_empty_windows_emit_nothing(run, ts) -> None:
    ex = run(
        script("TIME SIZE 10 SECONDS"),
        [("s", ("a", 0, ts(1))), ("s", ("a", 0, ts(35))), ("s", ("b", 0, ts(39)))],
    )
    # [0, 10) fires; [10, 20) and [20, 30) hold nothing; [30, 40) ends after the last event (39).
    assert ex.outputs["o"] == [("a", 1)]


def test_watermark_delay_accepts_out_of_order_events_within_it(run, ts) -> None:
    ex = run(
        script("TIME SIZE 10 SECONDS", "k, sum(v) AS total", "WATERMARK 5 SECONDS"),
        [
            ("s", ("a", 1, ts(8))),
            ("s", ("a", 2, ts(12))),  # watermark 7
            ("s", ("a", 4, ts(9))),  # not late (9 >= 7): still in [0, 10)
            ("s", ("a", 8, ts(16))),  # watermark 11 closes [0, 10)
            ("s", ("a", 16, ts(10))),  # late (10 < 11): dropped, counted
            ("s", ("a", 32, ts(30))),
        ],
    )
    assert ex.outputs["o"] == [("a", 5), ("a", 10)]
    assert ex.stats.late == {"s": 1}
    assert [d.stage for d in ex.dead_letters] == ["late"]


def test_advance_watermark_closes_windows_of_an_idle_source(run, ts) -> None:
    ex = run(script("TIME SIZE 10 SECONDS"), [("s", ("a", 0, ts(3)))], finish=False)
    assert ex.outputs["o"] == []
    ex.advance_watermark("s", ts(10))
    assert ex.outputs["o"] == [("a", 1)]


def test_decimal_sum_and_avg(run, ts) -> None:
    ex = run(
        script("TIME SIZE 1 DAY", "k, sum(v) AS total, avg(v) AS mean", v="decimal(10, 2)"),
        [
            ("s", ("a", Decimal("1.10"), ts(hours=1))),
            ("s", ("a", Decimal("2.25"), ts(hours=2))),
            ("s", ("a", Decimal("0.00"), ts(hours=3))),
            ("s", ("z", Decimal("0"), ts(days=1))),
        ],
    )
    assert ex.outputs["o"] == [("a", Decimal("3.35"), Decimal("1.116667"))]
