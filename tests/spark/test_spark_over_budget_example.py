"""examples/over_budget.cpl (a trigger's periodic read of a table, rate limited per caller, and its
ticks counted in a TIME window) on both engines under the controlled clock its header runs it with,
over a `daily_bill` table like the one examples/daily_bill.cpl writes: the same rows in the same
order, and the rows its header promises."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import assert_same, compile_text, run_reference, run_spark

from deployer.runner import bind_stores

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "over_budget.cpl"
SINKS = ["over_budget", "checks"]


def _crm(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE daily_bill (idcaller integer, day timestamp, total text, calls bigint, "
            "PRIMARY KEY (idcaller, day))"
        )
        bills = [
            (1, "2026-01-01", "30000.50", 9),
            (1, "2026-01-02", "100.00", 1),
            (2, "2026-01-01", "27999.99", 8),
        ]
        bills += [
            (3, "2026-01-02", "41000.00", 12),
            (4, "2026-01-01", "28000.01", 7),
            (5, "2026-01-02", "29000", 3),
        ]
        conn.executemany("INSERT INTO daily_bill VALUES (?, ?, ?, ?)", bills)
    conn.close()


def test_over_budget_example(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _crm(tmp_path / "crm.sqlite3")
    monkeypatch.setenv("CEP_STORE_CRM_URL", f"sqlite:///{tmp_path / 'crm.sqlite3'}")
    monkeypatch.setenv("CEP_TRIGGER_CLOCK", "2026-01-01T00:00Z/2026-01-01T03:00Z")
    graph = compile_text(EXAMPLE.read_text())
    stores = bind_stores(graph, {})
    ref = run_reference(graph, tmp_path, {}, SINKS, stores=stores)
    spk = run_spark(spark, graph, tmp_path, {}, SINKS, stores=stores)
    for sink in SINKS:
        assert_same(ref, spk, sink, ordered=True)
    assert spk.dead == [] and ref.dead == []
    # the three largest bills over 28,000 (caller 2's is under it), once an hour each, not every 5 minutes
    alerts = [(r["idcaller"], r["checked_at"][11:16]) for r in spk["over_budget"]]
    assert alerts == [(c, t) for t in ("00:05", "01:05", "02:05") for c in (3, 1, 5)]
    assert [r["checks"] for r in spk["checks"]] == [11, 12, 12]
