"""examples/fraud.cpl end to end on the reference executor: `cep run --engine local` over crafted
call records (tests/fraud_calls.py), the plans loaded by `bench/cdr.py plans`, the suspicious calls
materialized into the `crm` store: its embedded SQLite default, then a real PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fraud_calls import EXAMPLE, EXAMPLE_CALLS, SUSPECTS, TABLE, as_utc, jsonl, records, write_calls

from deployer.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
QUERY = "SELECT idcaller, call_time, idreceiver, duration, idplan FROM suspicious_calls ORDER BY 1, 2"


def load_plans(url: str) -> None:
    """The `plans` table of README.md's commands, for callers 1 to 20."""
    cmd = [sys.executable, str(ROOT / "bench" / "cdr.py"), "plans", url, "--callers", "20"]
    subprocess.run(cmd, check=True, capture_output=True)


def cep_run(tmp_path: Path, *store: str) -> list[tuple[Any, ...]]:
    """Run the example on the calls in two files; the `suspects` stream it wrote."""
    write_calls(tmp_path / "in", files=2)
    out, dead = tmp_path / "out", tmp_path / "dead"
    args = ["run", str(EXAMPLE), "--engine", "local", "--source", f"cdr=file:{tmp_path / 'in'}"]
    args += ["--sink", f"suspects=file:{out}", "--dead-letter", f"file:{dead}", "--until-idle", *store]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert not dead.exists() or all(not p.read_text() for p in dead.iterdir())
    rows = [json.loads(x) for p in sorted(out.iterdir()) for x in p.read_text().splitlines() if x]
    return [(r["idcaller"], as_utc(r["first_call"]), r["calls"], as_utc(r["call_time"])) for r in rows]


def table(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(c, as_utc(when), *rest) for c, when, *rest in rows]


def test_the_example_data_are_these_calls() -> None:
    """README.md runs the example on examples/fraud_calls/: the calls these tests check."""
    assert (EXAMPLE_CALLS / "cdr.jsonl").read_text() == jsonl(records())


def test_on_the_embedded_sqlite_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("CEP_DATA_DIR", str(data))
    monkeypatch.delenv("CEP_STORE_CRM_URL", raising=False)
    load_plans(f"sqlite:///{data / 'crm.sqlite3'}")
    assert cep_run(tmp_path) == SUSPECTS
    with sqlite3.connect(data / "crm.sqlite3") as conn:
        assert table(conn.execute(QUERY).fetchall()) == TABLE


@pytest.mark.postgres
def test_on_postgres(tmp_path: Path, pg_db: str) -> None:
    import psycopg

    load_plans(pg_db)
    assert cep_run(tmp_path, "--store", f"crm={pg_db}") == SUSPECTS
    with psycopg.connect(pg_db) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        assert table(conn.execute(QUERY).fetchall()) == TABLE
