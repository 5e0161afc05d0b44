"""A Spark task that fails after its UpdateSQL transaction committed, and that Spark runs again.

UpdateSQL runs in executor tasks (deployer/spark/datastores/sql.py). The test hook
`CEP_FAULT_AFTER_UPDATE=QUERY:MARKER` (deployer/spark/faults.py) makes the first task whose UpdateSQL
committed a batch raise, once (the marker file), and master `local[2,3]` lets Spark retry a task up
to three times: the retry executes the same events again. The statement takes one unit of stock
while there is some (`... WHERE qty > 0`), so executing an event twice would both take stock twice
and change the counts of the events after it. The run must end with the stock and the emitted
affected-row counts of the reference executor, each count the one the ledger recorded when the
event was first executed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fault_helpers import Feeder, reference_run, rows, run_env, run_to_end, spark_logs, spark_run_args

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

SCRIPT = """
CREATE STREAMSCHEMA orders WITH id integer, item integer, ts timestamp TIMESTAMP BY ts;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY take ON crm AS 'UPDATE stock SET qty = qty - 1 WHERE item = ? AND qty > 0';
INSERT INTO taken SELECT id, item, t.n AS n FROM orders ON SQL take, t, item, n;
"""

FILES, PER_FILE, ITEMS, QTY = 3, 12, 3, 5  # 36 orders for 15 units: the stock runs out mid-stream


def _orders() -> list[list[dict[str, Any]]]:
    rnd = random.Random(5)
    return [
        [
            {
                "id": f * PER_FILE + i + 1,
                "item": rnd.randint(1, ITEMS),
                "ts": f"2026-01-01T00:{f:02d}:{i:02d}Z",
            }
            for i in range(PER_FILE)
        ]
        for f in range(FILES)
    ]


def _stock(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE stock (item integer PRIMARY KEY, qty integer NOT NULL)")
        conn.execute("INSERT INTO stock SELECT i, %s FROM generate_series(1, %s) i", (QTY, ITEMS))


def _emitted(directory: Path) -> list[tuple[int, int, int]]:
    """(id, item, n) of every event a file sink wrote."""
    out = []
    for p in sorted(directory.rglob("*.jsonl")):
        if not p.name.startswith((".", "_")):
            out += [(r["id"], r["item"], r["n"]) for r in map(json.loads, p.read_text().splitlines())]
    return sorted(out)


def test_a_task_retried_after_its_update_committed_applies_once(
    pg_db: str, pg_reference_db: str, tmp_path: Path
) -> None:
    for url in (pg_db, pg_reference_db):
        _stock(url)
    orders = _orders()
    script = tmp_path / "take.cpl"
    script.write_text(SCRIPT, encoding="utf-8")
    feeder = Feeder(tmp_path / "in")
    feeder.add(orders)
    marker = tmp_path / "fault-fired"
    args = spark_run_args(
        script,
        tmp_path,
        [f"orders=file:{feeder.directory}"],
        sinks=[f"taken=file:{tmp_path / 'out'}"],
        stores=[f"crm={pg_db}"],
        master="local[2,3]",
    )
    # WARN: Spark then logs the failed task ("Lost task ...") with its exception, in the run's log.
    env = run_env(tmp_path, CEP_FAULT_AFTER_UPDATE=f"take:{marker}", CEP_SPARK_LOG_LEVEL="WARN")
    code, _, out = run_to_end(args, env, tmp_path, tmp_path / "spark.log")
    assert code == 0, out[-3000:]
    # The fault fired (the marker is made just before the raise) and the failed task was retried.
    assert marker.exists()
    logged = spark_logs(tmp_path / "checkpoint")
    assert "InjectedFault" in logged and "Lost task" in logged, logged[-3000:]
    assert "InjectedFault" not in out, out[-3000:]  # a retried task is no error of the run

    reference_run(
        script,
        [f"orders=file:{feeder.directory}"],
        [f"crm={pg_reference_db}"],
        tmp_path,
        "--sink",
        f"taken=file:{tmp_path / 'ref-out'}",
    )
    stock = "SELECT item, qty FROM stock ORDER BY item"
    assert rows(pg_reference_db, stock) == [(i, 0) for i in range(1, ITEMS + 1)]  # it ran out
    assert rows(pg_db, stock) == rows(pg_reference_db, stock)  # no event took stock twice

    emitted, want = _emitted(tmp_path / "out"), _emitted(tmp_path / "ref-out")
    assert len(want) == FILES * PER_FILE and {n for _, _, n in want} == {0, 1}
    assert emitted == want  # the same count for every event, the retried ones included

    # Each count emitted is the one recorded when the event was first executed: the ledger has
    # one row per event (key: the file's place in the source's arrival log, and the line), with
    # its count.
    by_position = {(f, i): o["id"] for f, batch in enumerate(orders) for i, o in enumerate(batch)}
    recorded = {}
    for key, affected in rows(pg_db, "SELECT key, affected FROM cep_ledger"):
        assert not key.startswith("sha256:"), key  # the key is the readable event id
        position, line = key.split("%00")
        recorded[by_position[(int(position), int(line))]] = affected
    assert recorded == {i: n for i, _, n in emitted}
