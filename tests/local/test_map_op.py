"""Map: one output tuple per input tuple, A'i = fi(t) (paper, Figure 2)."""

from __future__ import annotations

CDR = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, ts timestamp
  TIMESTAMP BY ts;
INSERT INTO costs SELECT idcaller, duration * 10 + 10 AS cost, ts FROM cdr;
"""


def test_figure_2_cost(run, ts) -> None:
    # cost = duration * 10 + 10; a NULL duration gives a NULL cost (the event is still emitted).
    ex = run(
        CDR,
        [
            ("cdr", (1, 2, 30, ts(1))),
            ("cdr", (2, 3, 0, ts(2))),
            ("cdr", (3, 1, None, ts(3))),
            ("cdr", (4, 1, 7, ts(4))),
        ],
    )
    assert ex.outputs["costs"] == [(1, 310, ts(1)), (2, 10, ts(2)), (3, None, ts(3)), (4, 80, ts(4))]
    assert ex.stats.events_out["costs"] == 4
    assert ex.dead_letters == []


def test_map_without_event_time_keeps_arrival_order(run) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH a integer, b integer;
    INSERT INTO o SELECT a + b AS total, a * b AS product FROM s;
    """
    ex = run(script, [("s", (3, 4)), ("s", (1, 1)), ("s", (-2, 5))])
    assert ex.outputs["o"] == [(7, 12), (2, 1), (3, -10)]


def test_map_error_dead_letters_the_event_and_the_run_continues(run) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH a integer, b integer;
    INSERT INTO o SELECT a / b AS q FROM s;
    """
    ex = run(script, [("s", (6, 3)), ("s", (1, 0)), ("s", (7, 2))])
    assert ex.outputs["o"] == [(2.0,), (3.5,)]  # integer / integer is a double
    [dl] = ex.dead_letters
    assert (dl.stage, dl.reason, dl.event, dl.line) == ("Map", "division by zero", (1, 0), 3)
    assert ex.stats.dead_lettered == {"Map": 1}


def test_source_stream_is_tapped_too(run, ts) -> None:
    ex = run(CDR, [("cdr", (1, 2, 30, ts(1)))])
    assert ex.outputs["cdr"] == [(1, 2, 30, ts(1))]
    assert ex.stats.events_in == {"cdr": 1}
