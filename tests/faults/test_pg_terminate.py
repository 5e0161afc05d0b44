"""The run's Postgres connections killed with `pg_terminate_backend` in the middle of its batches.

A side connection watches pg_stat_activity and terminates the run's backends (`application_name =
'cep'`, stores/sql/postgres_connection.py) while they execute a statement or sit in a transaction: a ReadSQL's batched
SELECT, an UpdateSQL's statements, a Materialize's COPY. Row triggers that sleep a little make the
UpdateSQL and the COPY last long enough to be caught: the first kill waits for one of them. The
server answers such a connection with SQLSTATE 57P01 (admin shutdown), which the store layer takes
as transient: the batch's transaction is rolled back and the call retried on a new connection
(stores/retry.py), and a write that did commit before the kill is found in the ledger on the retry.
Kills are at least KILL_SPACING_S apart, so a call's first retry (after ~0.5 s) is never killed
again: the run must go to the end by itself, and its tables must equal what the reference executor
writes, nothing lost, nothing twice.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import psycopg
import pytest
from fault_helpers import (
    CRM_SCRIPT,
    Background,
    Feeder,
    assert_same_results,
    crm_results,
    crm_tables,
    generate,
    kill_all,
    reference_run,
    run_env,
    spark_logs,
    spark_run_args,
    start,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

FILES, PER_FILE = 4, 40
KILL_SPACING_S = 2.0
MIN_KILLS = 2

SLOW_TRIGGERS = """
CREATE FUNCTION slow_row() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN PERFORM pg_sleep(0.008); RETURN NEW; END $$;
CREATE TRIGGER slow_update BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION slow_row();
CREATE TABLE call_log (id integer, caller integer, cost integer, n bigint, ts timestamptz);
CREATE TRIGGER slow_copy BEFORE INSERT ON call_log FOR EACH ROW EXECUTE FUNCTION slow_row();
"""


class Killer(Background):
    """Terminates the run's backends that are busy (a statement running, or inside a transaction),
    at most once every KILL_SPACING_S; the first one in the middle of a write (an UPDATE or COPY
    running), the others whatever they are doing."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.database = url.rsplit("/", 1)[1]
        self.kills: list[tuple[float, str, str]] = []  # (time, state, statement) of each kill
        super().__init__()

    def _run(self) -> None:
        t0 = last = time.monotonic()
        with psycopg.connect(self.url, autocommit=True) as admin:
            while not self._stop.wait(0.01):
                if time.monotonic() - last < KILL_SPACING_S:
                    continue
                writes_only = not self.kills
                busy = admin.execute(
                    "SELECT pid, state, left(query, 60) FROM pg_stat_activity WHERE datname = %s"
                    " AND application_name = 'cep' AND state IN ('active', 'idle in transaction')"
                    " AND query NOT LIKE 'SET %%' AND (NOT %s OR state = 'active' AND"
                    " (query LIKE 'UPDATE%%' OR query LIKE 'COPY%%')) LIMIT 1",
                    (self.database, writes_only),
                ).fetchone()
                if busy is None:
                    continue
                pid, state, query = busy
                killed = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
                if killed and killed[0]:
                    last = time.monotonic()
                    self.kills.append((last - t0, str(state), " ".join(str(query).split())))


def test_backends_terminated_mid_batch_are_retried(pg_db: str, pg_reference_db: str, tmp_path: Path) -> None:
    for url in (pg_db, pg_reference_db):
        crm_tables(url)
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute(SLOW_TRIGGERS)
    script = tmp_path / "crm.cpl"
    script.write_text(CRM_SCRIPT, encoding="utf-8")
    feeder = Feeder(tmp_path / "in")
    feeder.add(generate(random.Random(9), FILES, PER_FILE))
    log = tmp_path / "spark.log"
    args = spark_run_args(script, tmp_path, [f"calls=file:{feeder.directory}"], stores=[f"crm={pg_db}"])
    proc = start(args, run_env(tmp_path), tmp_path, log)
    try:
        with Killer(pg_db) as killer:
            code = proc.wait(300)
    finally:
        kill_all(proc)
    out = log.read_text(errors="replace") + spark_logs(tmp_path / "checkpoint")  # the workers' retries
    report = "\n".join(f"{t:6.1f} s: {state}: {query}" for t, state, query in killer.kills)
    print(f"{len(killer.kills)} backends terminated:\n{report}")
    assert code == 0, f"{report}\n{out[-3000:]}"

    # The kills happened, in the middle of batches, and the store calls they hit were retried.
    assert len(killer.kills) >= MIN_KILLS, report
    assert killer.kills[0][1] == "active" and killer.kills[0][2].startswith(("UPDATE", "COPY")), report
    assert "terminating connection due to administrator command" in out
    assert out.count("; retrying in ") >= MIN_KILLS // 2, out[-3000:]

    reference_run(script, [f"calls=file:{feeder.directory}"], [f"crm={pg_reference_db}"], tmp_path)
    want = crm_results(pg_reference_db)
    assert_same_results(crm_results(pg_db), want)
    assert all(r[3] == 1 for r in want["call_log"])  # every call charged once
