"""Join: two TIME-windowed inputs; pair (l, r) can match when r.ts - Sl < l.ts < r.ts + Sr."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def script(watermark: str = "") -> str:
    # Sl = 10 s (left, a), Sr = 5 s (right, b)
    return f"""
    CREATE STREAMSCHEMA a WITH k integer, v varchar, t timestamp TIMESTAMP BY t {watermark};
    CREATE STREAMSCHEMA b WITH k integer, w varchar, t timestamp TIMESTAMP BY t {watermark};
    INSERT INTO j SELECT a.t AS t, a.v, b.w
      FROM a WINDOW TIME SIZE 10 SECONDS, b WINDOW TIME SIZE 5 SECONDS WHERE a.k = b.k;
    """


def s(n: int) -> datetime:
    return T0 + timedelta(seconds=n)


def test_hand_computed_pairs(run) -> None:
    ex = run(
        script(),
        [
            ("a", (1, "L1", s(0))),
            ("b", (1, "R1", s(3))),  # 3-10 < 0 < 3+5: matches L1
            ("b", (1, "R2", s(12))),  # L1: 2 < 0 fails; L2 (20) is not < 17
            ("b", (1, "R3", s(16))),  # L2: 6 < 20 < 21: matches
            ("b", (2, "R4", s(18))),  # in time with L2, but k differs
            ("a", (1, "L2", s(20))),
            ("b", (1, "R6", s(20))),  # equal times match
            ("b", (1, "R5", s(30))),  # L2: 20 < 20 fails (strict)
        ],
    )
    assert ex.outputs["j"] == [(s(0), "L1", "R1"), (s(20), "L2", "R3"), (s(20), "L2", "R6")]


def test_output_waits_for_both_watermarks(run) -> None:
    ex = run(script(), [("a", (1, "L1", s(0))), ("b", (1, "R1", s(3)))], finish=False)
    assert ex.outputs["j"] == []  # R1 (3) is not below a's watermark (0) yet
    ex.push("a", (9, "L9", s(40)))
    ex.push("b", (9, "R9", s(40)))
    assert ex.outputs["j"] == [(s(0), "L1", "R1")]


def test_predicate_error_dead_letters_the_pair(run) -> None:
    text = """
    CREATE STREAMSCHEMA a WITH k integer, t timestamp TIMESTAMP BY t;
    CREATE STREAMSCHEMA b WITH k integer, t timestamp TIMESTAMP BY t;
    INSERT INTO j SELECT a.k AS ka, b.k AS kb
      FROM a WINDOW TIME SIZE 10 SECONDS, b WINDOW TIME SIZE 10 SECONDS WHERE 10 / a.k = b.k;
    """
    ex = run(text, [("a", (0, s(1))), ("a", (2, s(1))), ("b", (5, s(2)))])
    assert ex.outputs["j"] == [(2, 5)]
    assert [(d.stage, d.event) for d in ex.dead_letters] == [("Join", (0, s(1), 5, s(2)))]


events = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(left=events, right=events, order=st.randoms(use_true_random=False))
def test_matches_brute_force_whatever_the_arrival_order(run, left, right, order) -> None:
    lefts = [("a", (k, f"L{i}", s(t))) for i, (k, t) in enumerate(left)]
    rights = [("b", (k, f"R{i}", s(t))) for i, (k, t) in enumerate(right)]
    pushes = lefts + rights
    order.shuffle(pushes)
    ex = run(script("WATERMARK 1 MINUTE"), pushes)  # nothing is late, whatever the order
    expected = sorted(
        (l_t, lv, rv)
        for _, (lk, lv, l_t) in lefts
        for _, (rk, rv, r_t) in rights
        if lk == rk and r_t - timedelta(seconds=10) < l_t < r_t + timedelta(seconds=5)
    )
    got = ex.outputs["j"]
    assert sorted(got) == expected
    assert [e[0] for e in got] == sorted(e[0] for e in got)  # the output is in event-time order
