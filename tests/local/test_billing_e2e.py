"""The paper's running example (examples/billing.cpl) end to end on a small hand-made input."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

BILLING = (Path(__file__).parents[2] / "examples" / "billing.cpl").read_text()


def d(day: int, h: int = 0, m: int = 0, s: int = 0) -> datetime:
    return datetime(2026, 1, day, h, m, s, tzinfo=UTC)


# (idcaller, idreceiver, duration, timestamp); cost = duration * 10 + 10 when duration >= 10
CDR1 = [
    (1, 10, 30, d(1, 8)),  # 310
    (2, 11, 5, d(1, 9)),  # free
    (1, 12, 12, d(1, 23, 59, 59)),  # 130
    (2, 10, 100, d(2, 10)),  # 1010
    (1, 10, 10, d(3)),  # 110, in Jan 3, whose day never completes
]
CDR2 = [
    (2, 13, 20, d(1, 12)),  # 210
    (3, 1, 9, d(1, 13)),  # free: caller 3 has no bill on Jan 1
    (1, 14, 60, d(2)),  # 610, the first instant of Jan 2
    (3, 2, 45, d(2, 18, 30)),  # 460
    (3, 3, 5, d(3, 1)),  # free; it brings cdr2's watermark past Jan 2: the merge's is the least of both
]
# Jan 1: caller 1 = 310 + 130 = 440, caller 2 = 210           (groups in order of first call)
# Jan 2: caller 1 = 610, caller 2 = 1010, caller 3 = 460
# Jan 3: incomplete (the input ends at its first hour): no bill
BILLS = [(1, 440), (2, 210), (1, 610), (2, 1010), (3, 460)]


def test_daily_bills(run) -> None:
    ex = run(BILLING, [("cdr1", e) for e in CDR1] + [("cdr2", e) for e in CDR2])
    assert ex.outputs["bill"] == BILLS
    assert [c[1] for c in ex.outputs["costs"]] == [310, 210, 130, 610, 1010, 460, 110]
    assert ex.stats.events_in == {"cdr1": 5, "cdr2": 5}
    assert ex.stats.total_filtered == 3
    assert ex.dead_letters == []


def test_same_bills_with_interleaved_arrival(run) -> None:
    pushes = [("cdr2", e) for e in CDR2[:2]] + [("cdr1", e) for e in CDR1[:3]]
    pushes += [("cdr2", e) for e in CDR2[2:]] + [("cdr1", e) for e in CDR1[3:]]
    assert run(BILLING, pushes).outputs["bill"] == BILLS


def test_a_merge_waits_for_its_slower_input(run) -> None:
    """Without cdr2's call of Jan 3, cdr2's watermark ends on Jan 2 at 18:30: the merged stream's is
    the least of its inputs', so Jan 2's bills are not due when the input ends (a later run that
    brings cdr2's next calls would emit them), on both engines."""
    ex = run(BILLING, [("cdr1", e) for e in CDR1] + [("cdr2", e) for e in CDR2[:-1]])
    assert ex.outputs["bill"] == BILLS[:2]
