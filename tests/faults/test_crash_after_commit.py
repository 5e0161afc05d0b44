"""A crash exactly after a store has committed a micro-batch and before Spark has logged it, made
deterministic with the test hook `CEP_FAULT_AFTER_COMMIT=TABLE:BATCH` (deployer/spark/faults.py): the
driver SIGKILLs itself and its JVM right after the Materialize into TABLE committed batch BATCH.
tests/faults/test_materialize_kill.py reaches this point only by chance.

- Postgres (UpdateSQL + Materialize): the ledger row of the batch is there and the checkpoint has
  the batch's offsets but not its commit; the restart replays the batch, the ledger skips it (the
  very same ledger row stays, no row is doubled, no account charged twice) and the tables equal the
  reference executor's.

tests/faults/test_crash_between_sinks.py does the same between a Redis and a Postgres sink.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from fault_helpers import (
    Feeder,
    generate,
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

PG_SCRIPT = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY charge ON crm AS 'UPDATE accounts SET spent = spent + ?, calls = calls + 1 WHERE caller = ?';
CREATE TABLE call_log (id integer, caller integer, cost integer, n bigint, ts timestamp) IN crm;
INSERT INTO priced SELECT id, caller, duration * 10 + 10 AS cost, ts FROM calls WHERE duration >= 10;
INSERT INTO charged SELECT id, caller, cost, c.n AS n, ts FROM priced ON SQL charge, c, cost, caller, n;
INSERT INTO TABLE call_log SELECT id, caller, cost, n, ts FROM charged;
"""

FILES, PER_FILE, CRASH_AT = 3, 40, 1  # one file per micro-batch (--max-files-per-trigger 1)


def _accounts(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE accounts (caller integer PRIMARY KEY, spent bigint NOT NULL, calls integer NOT NULL)"
        )
        conn.execute("INSERT INTO accounts SELECT c, 0, 0 FROM generate_series(1, 8) c")


def test_crash_after_the_postgres_commit_replays_nothing(
    pg_db: str, pg_reference_db: str, tmp_path: Path
) -> None:
    for url in (pg_db, pg_reference_db):
        _accounts(url)
    script = tmp_path / "calls.cpl"
    script.write_text(PG_SCRIPT, encoding="utf-8")
    node = materialize_node(PG_SCRIPT, "call_log")
    feeder = Feeder(tmp_path / "in")
    feeder.add(generate(random.Random(3), FILES, PER_FILE))
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "spark.log"
    args = spark_run_args(
        script, tmp_path, [f"calls=file:{feeder.directory}"], stores=[f"crm={pg_db}"], checkpoint=checkpoint
    )

    # Exactly the state of a crash between the two commits: Postgres has batch CRASH_AT, Spark not.
    killed_after_commit(args, run_env(tmp_path), tmp_path, log, checkpoint, "call_log", CRASH_AT)
    query = checkpoint / "table_call_log"
    assert (query / "commits" / str(CRASH_AT - 1)).exists()
    committed = ledger_row(pg_db, node, CRASH_AT)
    assert len(committed) == 1, "the batch's ledger row is not there"
    assert not ledger_row(pg_db, node, CRASH_AT + 1)
    logged = len(rows(pg_db, "SELECT id FROM call_log"))

    code, _, out = run_to_end(args, run_env(tmp_path), tmp_path, log)
    assert code == 0, out[-3000:]
    # Every batch the run planned is committed (after the data, Spark may run one without data to
    # move the watermark on: it writes nothing).
    planned = {p.name for p in (query / "offsets").iterdir() if p.name.isdigit()}
    assert planned == {p.name for p in (query / "commits").iterdir() if p.name.isdigit()} >= {str(FILES - 1)}
    # The replay found the batch's ledger row and wrote nothing: the row is the same one (not
    # deleted and written again), and one ledger row per batch.
    assert ledger_row(pg_db, node, CRASH_AT) == committed
    batches = rows(pg_db, f"SELECT key FROM cep_ledger WHERE operator = '{node}'")
    assert sorted(k for (k,) in batches) == [f"batch:{b}" for b in range(FILES)]

    reference_run(script, [f"calls=file:{feeder.directory}"], [f"crm={pg_reference_db}"], tmp_path)
    log_query = "SELECT id, caller, cost, n, ts FROM call_log"
    got, want = Counter(rows(pg_db, log_query)), Counter(rows(pg_reference_db, log_query))
    assert logged < sum(want.values())  # the killed run had not written everything
    assert max(got.values()) == 1, f"rows written twice: {[r for r, k in got.items() if k > 1][:5]}"
    assert got == want
    assert all(r[3] == 1 for r in want)  # every charge hit its account once
    accounts = "SELECT caller, spent, calls FROM accounts ORDER BY caller"
    assert rows(pg_db, accounts) == rows(pg_reference_db, accounts)
    charged = rows(pg_db, "SELECT count(*) FROM cep_ledger WHERE key NOT LIKE 'batch:%'")
    assert charged == [(sum(want.values()),)]  # one UpdateSQL ledger row per event
