"""A trigger's ticks across restarts and a crash (docs/language.md, "Triggers"): its offsets are its
ticks (deployer.spark.streams.trigger_source), so that a run killed right after a store committed a
micro-batch of ticks, and the runs after it, neither skip nor repeat a tick's effects.

Three runs on one checkpoint, under the controlled clock (CEP_TRIGGER_CLOCK=START/NOW) with NOW
later each time, as if the deployment were stopped and started again:
1. ticks up to 00:10, all written;
2. ticks up to 00:25, killed by `CEP_FAULT_AFTER_COMMIT` right after PostgreSQL committed their
   micro-batch and before Spark logged it;
3. ticks up to 00:40: the killed micro-batch is replayed (the ledger finds it written), then the
   ticks that fell while the deployment was down are read.
Together they must have written what the reference executor writes in one run up to 00:40: every
tick's rows once, each account charged once per tick.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import psycopg
import pytest
from fault_helpers import (
    killed_after_commit,
    ledger_row,
    materialize_node,
    reference_run,
    rows,
    run_env,
    run_to_end,
    spark_run_args,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

SCRIPT = """
CREATE TRIGGER every5 AT EVERY 5 MINUTES;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY over_limit ON crm AS 'SELECT caller, balance FROM accounts WHERE balance < 0 ORDER BY caller'
  RETURNS (caller integer, balance integer);
CREATE SQLQUERY fee ON crm AS 'UPDATE fees SET n = n + 1 WHERE caller = ?';
CREATE TABLE reminders (at timestamp, caller integer, balance integer, n bigint) IN crm;
INSERT INTO overdrawn SELECT triggered_time AS at, a.caller AS caller, a.balance AS balance
  FROM every5 ON SQL over_limit, a, caller, balance;
INSERT INTO charged SELECT at, caller, balance, f.n AS n FROM overdrawn ON SQL fee, f, caller, n;
INSERT INTO TABLE reminders SELECT at, caller, balance, n FROM charged;
"""
START = "2026-01-01T00:00:00Z"


def _accounts(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        # the fees are not what the trigger reads: within a micro-batch Spark reads before it updates
        # (docs/language.md, "Engines"), the reference executor event by event
        conn.execute("CREATE TABLE accounts (caller integer PRIMARY KEY, balance integer NOT NULL)")
        conn.execute("INSERT INTO accounts VALUES (1, 50), (2, -3), (3, -40)")
        conn.execute("CREATE TABLE fees (caller integer PRIMARY KEY, n integer NOT NULL)")
        conn.execute("INSERT INTO fees VALUES (1, 0), (2, 0), (3, 0)")


def test_no_tick_is_skipped_or_repeated_across_restarts_and_a_crash(
    pg_db: str, pg_reference_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for url in (pg_db, pg_reference_db):
        _accounts(url)
    script = tmp_path / "reminders.cpl"
    script.write_text(SCRIPT, encoding="utf-8")
    node = materialize_node(SCRIPT, "reminders")
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "spark.log"
    args = spark_run_args(script, tmp_path, [], stores=[f"crm={pg_db}"], checkpoint=checkpoint)

    def clock(now: str) -> dict[str, str]:  # the run's environment, its clock at `now`
        return run_env(tmp_path, CEP_TRIGGER_CLOCK=f"{START}/2026-01-01T{now}:00Z")

    def run(now: str) -> tuple[int, str]:
        code, _, out = run_to_end(args, clock(now), tmp_path, log)
        return code, out

    code, out = run("00:10")
    assert code == 0, out[-3000:]
    assert len(rows(pg_db, "SELECT * FROM reminders")) == 4  # ticks 00:05 and 00:10, two callers each

    killed_after_commit(args, clock("00:25"), tmp_path, log, checkpoint, "reminders", 1)
    committed = ledger_row(pg_db, node, 1)
    assert len(committed) == 1, "the killed micro-batch's ledger row is not there"
    assert len(rows(pg_db, "SELECT * FROM reminders")) == 10  # 00:15, 00:20, 00:25 were written

    code, out = run("00:40")
    assert code == 0, out[-3000:]
    assert ledger_row(pg_db, node, 1) == committed  # replayed, found written, not written again

    monkeypatch.setenv("CEP_TRIGGER_CLOCK", f"{START}/2026-01-01T00:40:00Z")
    reference_run(script, [], [f"crm={pg_reference_db}"], tmp_path)
    reminders = "SELECT at, caller, balance, n FROM reminders"
    got, want = Counter(rows(pg_db, reminders)), Counter(rows(pg_reference_db, reminders))
    assert max(got.values()) == 1, f"rows written twice: {[r for r, k in got.items() if k > 1]}"
    assert got == want
    assert sorted({r[0].strftime("%H:%M") for r in want}) == [f"00:{m:02d}" for m in range(5, 45, 5)]
    fees = "SELECT caller, n FROM fees ORDER BY caller"
    assert rows(pg_db, fees) == rows(pg_reference_db, fees) == [(1, 0), (2, 8), (3, 8)]  # once per tick
