"""examples/fraud.cpl on Spark: the crafted calls of tests/fraud_calls.py in three files read one per
micro-batch (so partial matches cross batches), the `crm` store its embedded SQLite default; the
matches and the `suspicious_calls` table are the ones the reference executor gives
(tests/local/test_fraud_example.py)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fraud_calls import EXAMPLE, SUSPECTS, TABLE, as_utc, records
from spark_helpers import chunks, compile_text, prepare, run_spark

from deployer.runner import bind_stores

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_fraud_example(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("CEP_DATA_DIR", str(data))
    monkeypatch.delenv("CEP_STORE_CRM_URL", raising=False)
    plans = [sys.executable, str(ROOT / "bench" / "cdr.py"), "plans", f"sqlite:///{data / 'crm.sqlite3'}"]
    subprocess.run([*plans, "--callers", "20"], check=True, capture_output=True)
    graph = compile_text(EXAMPLE.read_text())
    sources = prepare(tmp_path, {"cdr": chunks(records(), 3)})
    out = run_spark(spark, graph, tmp_path, sources, ["suspects"], max_files=1, stores=bind_stores(graph, {}))
    assert out.dead == []
    matches = [
        (r["idcaller"], as_utc(r["first_call"]), r["calls"], as_utc(r["call_time"])) for r in out["suspects"]
    ]
    # one automaton per caller: the order of the matches is fixed per caller only
    assert sorted(matches) == sorted(SUSPECTS)
    for caller in {m[0] for m in SUSPECTS}:
        assert [m for m in matches if m[0] == caller] == [m for m in SUSPECTS if m[0] == caller]
    with sqlite3.connect(data / "crm.sqlite3") as conn:
        rows = conn.execute(
            "SELECT idcaller, call_time, idreceiver, duration, idplan FROM suspicious_calls ORDER BY 1, 2"
        ).fetchall()
    assert [(c, as_utc(when), *rest) for c, when, *rest in rows] == TABLE
