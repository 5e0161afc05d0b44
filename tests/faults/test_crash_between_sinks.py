"""A crash between two sinks of one script, a Redis table and a Postgres table: the run is killed
right after the Redis sink has committed micro-batch N (test hook `CEP_FAULT_AFTER_COMMIT`, see
deployer/spark/faults.py) and before the Postgres sink has committed it. With `CEP_MAX_QUERIES=1` the
queries run one after the other in the script's order (the Redis table first), so the Postgres
sink has committed nothing at that point: the stores are as far apart as they can be. After the
restart, Redis replays batch N (its marker says it took effect: nothing is written, which the
server's HSET count shows) and Postgres writes every batch; both must then equal what the
reference executor writes.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import psycopg
import pytest
import redis
from fault_helpers import (
    Feeder,
    generate,
    killed_after_commit,
    materialize_node,
    reference_run,
    rows,
    run_env,
    run_to_end,
    spark_run_args,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres, pytest.mark.redis]

SCRIPT = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE DATASTORE crm TYPE postgresql;
CREATE DATASTORE cache TYPE redis;
CREATE TABLE cost_of (id integer PRIMARY KEY, caller integer, cost integer) IN cache;
CREATE TABLE call_log (id integer, caller integer, cost integer, ts timestamp) IN crm;
INSERT INTO priced SELECT id, caller, duration * 10 + 10 AS cost, ts FROM calls WHERE duration >= 10;
INSERT INTO TABLE cost_of SELECT id, caller, cost FROM priced;
INSERT INTO TABLE call_log SELECT id, caller, cost, ts FROM priced;
"""

FILES, PER_FILE, CRASH_AT = 3, 40, 1  # one file per micro-batch (--max-files-per-trigger 1)


def _hashes(client: redis.Redis, table: str) -> dict[bytes, dict[bytes, bytes]]:
    return {k: client.hgetall(k) for k in client.scan_iter(match=table + ":*")}  # type: ignore[misc]


def _hset_calls(client: redis.Redis) -> int:
    """HSETs the server executed since CONFIG RESETSTAT (those of scripts included): an upsert
    written twice leaves the same hash, but not the same count."""
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_hset", {}).get("calls", 0))  # type: ignore[union-attr]


def _markers(client: redis.Redis) -> set[int]:
    """The batches whose marker says they took effect in Redis (cep:ledger:<deployment>:<node>:<batch>)."""
    return {int(k.rsplit(b":", 1)[1]) for k in client.scan_iter(match="cep:ledger:*")}


def test_crash_between_a_redis_and_a_postgres_sink(
    pg_db: str, pg_reference_db: str, redis_db: str, tmp_path: Path
) -> None:
    ref_redis = redis_db.rsplit("/", 1)[0] + "/1"
    with redis.Redis.from_url(ref_redis) as r:
        r.flushdb()
    script = tmp_path / "mixed.cpl"
    script.write_text(SCRIPT, encoding="utf-8")
    pg_node = materialize_node(SCRIPT, "call_log")
    feeder = Feeder(tmp_path / "in")
    feeder.add(generate(random.Random(4), FILES, PER_FILE))
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "spark.log"
    args = spark_run_args(
        script,
        tmp_path,
        [f"calls=file:{feeder.directory}"],
        stores=[f"crm={pg_db}", f"cache={redis_db}"],
        checkpoint=checkpoint,
    )
    client = redis.Redis.from_url(redis_db)
    client.config_resetstat()
    try:
        env = run_env(tmp_path, CEP_MAX_QUERIES="1")
        # Redis has batches 0..N, the checkpoint has N's offsets but not its commit; Postgres nothing.
        killed_after_commit(args, env, tmp_path, log, checkpoint, "cost_of", CRASH_AT)
        assert _markers(client) == set(range(CRASH_AT + 1))
        with psycopg.connect(pg_db) as conn:
            assert conn.execute("SELECT to_regclass('cep_ledger')").fetchone() == (None,), (
                "Postgres had begun"
            )
        before = _hashes(client, "cost_of")
        assert before
        # What a crash while the Postgres table's query logged its first batch would leave too: the
        # log entry's temp file, never renamed into place (deployer.spark.run.query_logs.drop_interrupted_log_writes).
        (checkpoint / "table_call_log" / "offsets").mkdir(parents=True)
        (checkpoint / "table_call_log" / "offsets" / ".0.5e1f0c3a-crash.tmp").write_bytes(b"")

        code, _, out = run_to_end(args, run_env(tmp_path), tmp_path, log)
        assert code == 0, out[-3000:]
        for query in ("table_cost_of", "table_call_log"):
            assert (checkpoint / query / "commits" / str(FILES - 1)).exists()
        assert _markers(client) == set(range(FILES))
        written = _hset_calls(client)
        reference_run(
            script,
            [f"calls=file:{feeder.directory}"],
            [f"crm={pg_reference_db}", f"cache={ref_redis}"],
            tmp_path,
        )

        log_query = "SELECT id, caller, cost, ts FROM call_log"
        got, want = Counter(rows(pg_db, log_query)), Counter(rows(pg_reference_db, log_query))
        assert sum(want.values()) > 0 and max(got.values()) == 1
        assert got == want
        assert rows(pg_db, f"SELECT key FROM cep_ledger WHERE operator = '{pg_node}' ORDER BY key") == [
            (f"batch:{b}",) for b in range(FILES)
        ]
        # Every row was written to Redis once, the replayed batch not again: one HSET per row and
        # one per batch marker (`~done`).
        assert written == sum(want.values()) + FILES
        with redis.Redis.from_url(ref_redis) as ref:
            reference = _hashes(ref, "cost_of")
        assert len(reference) == sum(want.values())
        after = _hashes(client, "cost_of")
        assert after == reference
        assert before.items() <= after.items()
    finally:
        client.close()
