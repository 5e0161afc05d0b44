"""Union: merges inputs of identical schema; with event time, in event-time order."""

from __future__ import annotations

SCRIPT = """
CREATE STREAMSCHEMA cdr1 WITH id integer, ts timestamp TIMESTAMP BY ts;
CREATE STREAMSCHEMA cdr2 WITH id integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO allcdr SELECT * FROM cdr1, cdr2;
"""


def test_merges_in_event_time_order_ties_by_input_then_arrival(run, ts) -> None:
    ex = run(
        SCRIPT,
        [
            ("cdr2", (20, ts(2))),
            ("cdr1", (10, ts(1))),
            ("cdr1", (11, ts(2))),
            ("cdr2", (21, ts(2))),
            ("cdr1", (12, ts(5))),
            ("cdr2", (22, ts(3))),
        ],
    )
    # ts 2 is a tie between cdr1 (11) and cdr2 (20, 21): cdr1 is the first input of the union.
    assert [e[0] for e in ex.outputs["allcdr"]] == [10, 11, 20, 21, 22, 12]


def test_result_does_not_depend_on_interleaving(run, ts) -> None:
    a = [("cdr1", (i, ts(i * 3))) for i in range(10)]
    b = [("cdr2", (100 + i, ts(i * 2))) for i in range(10)]
    interleaved = [e for pair in zip(a, b, strict=True) for e in pair]
    one = run(SCRIPT, a + b).outputs["allcdr"]
    two = run(SCRIPT, b + a).outputs["allcdr"]
    three = run(SCRIPT, interleaved).outputs["allcdr"]
    assert one == two == three
    assert [e[1] for e in one] == sorted(e[1] for e in one)


def test_events_wait_for_the_slower_input(run, ts) -> None:
    ex = run(SCRIPT, [("cdr1", (1, ts(1))), ("cdr1", (2, ts(9)))], finish=False)
    assert ex.outputs["allcdr"] == []  # cdr2 has no watermark yet: nothing is final
    ex.push("cdr2", (3, ts(5)))
    ex.push("cdr2", (4, ts(6)))
    # watermarks: cdr1 = 9, cdr2 = 6: events before 6 are final
    assert [e[0] for e in ex.outputs["allcdr"]] == [1, 3]
    ex.finish()
    assert [e[0] for e in ex.outputs["allcdr"]] == [1, 3, 4, 2]


def test_ended_input_does_not_hold_back_the_merge(run, ts) -> None:
    ex = run(SCRIPT, [("cdr1", (1, ts(1))), ("cdr1", (2, ts(9)))], finish=False)
    ex.end_stream("cdr2")
    assert [e[0] for e in ex.outputs["allcdr"]] == [1]


def test_union_without_event_time_is_arrival_order(run) -> None:
    script = """
    CREATE STREAMSCHEMA s1 WITH id integer;
    CREATE STREAMSCHEMA s2 WITH id integer;
    INSERT INTO u SELECT * FROM s1, s2;
    """
    ex = run(script, [("s2", (1,)), ("s1", (2,)), ("s2", (3,))])
    assert ex.outputs["u"] == [(1,), (2,), (3,)]
