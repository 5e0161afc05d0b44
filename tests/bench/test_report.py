"""bench/rounds and bench/report: what a row says of its rounds, and what `bench/run --compare` flags
(issue 40: every row a median with its spread, changes told from noise)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import report
from rounds import alternating, row


def test_a_row_is_the_median_of_its_rounds_with_their_range() -> None:
    r = row("w", [10.0, 30.0, 20.0], [5.0, 10.0, 20.0], "hand")
    assert r["project_events_per_s"] == 20.0
    assert r["project_spread"] == [10.0, 30.0]
    assert r["baseline_events_per_s"] == 10.0
    assert r["ratio"] == 2.0
    # each round's pair: 10/5, 30/10, 20/20
    assert r["ratio_spread"] == [1.0, 3.0]


def test_a_duration_row_is_faster_above_one() -> None:
    r = row("w", [100.0, 110.0, 90.0], [200.0, 220.0, 180.0], "hand", unit="ms", lower_is_better=True)
    assert r["ratio"] == pytest.approx(2.0)
    assert r["unit"] == "ms"


def test_rounds_alternate_which_side_goes_first() -> None:
    order: list[str] = []
    alternating(3, lambda tag: order.append(tag), lambda tag: order.append(tag))
    assert order == ["b0", "p0", "p1", "b1", "b2", "p2"]


def _doc(*rows: dict) -> dict:
    return {"revision": "abc", "when": "t", "machine": "m", "results": list(rows)}


def test_compare_flags_only_changes_beyond_both_spreads() -> None:
    old = _doc(
        row("rate", [100.0, 90.0, 110.0], [50.0] * 3, "b"), row("noise", [100.0, 80.0, 120.0], None, None)
    )
    new = _doc(
        row("rate", [150.0, 140.0, 160.0], [50.0] * 3, "b"), row("noise", [110.0, 90.0, 130.0], None, None)
    )
    text, changes = report.compare(old, new)
    by = {c["workload"]: c for c in changes}
    assert by["rate"]["beyond_spread"] and by["rate"]["better"]
    assert by["rate"]["project_change_pct"] == pytest.approx(50.0)
    assert not by["noise"]["beyond_spread"]
    assert "BETTER, beyond the spread" in text


def test_a_slower_duration_is_worse() -> None:
    old = _doc(row("batch", [100.0, 101.0, 99.0], [100.0] * 3, "b", unit="ms", lower_is_better=True))
    new = _doc(row("batch", [200.0, 201.0, 199.0], [100.0] * 3, "b", unit="ms", lower_is_better=True))
    _, [c] = report.compare(old, new)
    assert c["beyond_spread"] and not c["better"]


def test_rows_only_one_run_has_are_listed_apart() -> None:
    text, changes = report.compare(
        _doc(row("gone", [1.0] * 3, None, None)), _doc(row("new", [1.0] * 3, None, None))
    )
    assert changes == []
    assert "only in the new run: new" in text and "only in the old run: gone" in text


def test_the_json_names_the_revision_measured(tmp_path: Path) -> None:
    doc = report.document([], quick=True, repo=Path(__file__).resolve().parents[2])
    assert doc["revision"] not in ("", "unknown")
    assert report.revision(tmp_path) == "unknown"
