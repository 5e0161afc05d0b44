"""Exactly-once in effect on Spark, against a real Postgres (docs/architecture.md, decision 6).

A deployment is run twice over the same input under the same deployment name, with its checkpoint
deleted in between: Spark replays every batch (same batch ids, same event ids), and the ledger must
turn every replayed UpdateSQL event and Materialize batch into a no-op. The UpdateSQL node also
feeds a file sink, a table and a dead letter, i.e. three streaming queries that each recompute it:
without the ledger, even the first run would charge several times.
"""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cpl.compiler import compile_script
from deployer.runner import bind_stores
from deployer.spark.datastores.materialize import materialize_writer
from deployer.spark.handlers import spark_graph
from deployer.spark.run.deployment import SparkDeployment
from operators import graph as g

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.slow]

SCRIPT = """
CREATE STREAMSCHEMA pay WITH id integer, amount integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY charge ON crm AS 'UPDATE balances SET amount = amount - ? WHERE id = ?';
CREATE TABLE charges (id integer, amount integer, n bigint) IN crm;
INSERT INTO charged SELECT id, amount, c.n FROM pay ON SQL charge, c, amount, id, n;
INSERT INTO TABLE charges SELECT id, amount, n FROM charged;
"""

FILES = [
    [(1, 10), (2, 20), (1, 5), (3, 7)],
    [(2, 500), (1, 1), (4, 3), (3, 3)],  # (2, 500) overdraws: CHECK (amount >= 0)
    [(2, 30), (1, 4)],
]


def _write_inputs(directory: Path) -> None:
    directory.mkdir(parents=True)
    for i, rows in enumerate(FILES):
        text = "".join(json.dumps({"id": k, "amount": a}) + "\n" for k, a in rows)
        (directory / f"part-{i:04d}.jsonl").write_text(text, encoding="utf-8")


def _state(pg_db: str) -> tuple[list[Any], list[Any], int]:
    with psycopg.connect(pg_db) as conn:
        balances = conn.execute("SELECT id, amount FROM balances ORDER BY id").fetchall()
        charges = conn.execute("SELECT id, amount, n FROM charges ORDER BY id, amount").fetchall()
        entries = conn.execute("SELECT count(*) FROM cep_ledger").fetchone()
    assert entries is not None
    return balances, charges, int(entries[0])


def _dead_letters(directory: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(directory.glob("dead-letter-*.jsonl")):
        out += [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()]
    return out


def test_replaying_every_batch_applies_nothing_twice(spark: Any, pg_db: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE balances (id integer PRIMARY KEY, amount integer CHECK (amount >= 0))")
        conn.execute("INSERT INTO balances VALUES (1, 100), (2, 100), (3, 100)")
    graph = compile_script(SCRIPT).graph
    bindings = bind_stores(graph, {"crm": pg_db})
    assert bindings is not None
    config = replace(bindings, deployment="billing-test")
    inputs, checkpoint, out, dead = (tmp_path / d for d in ("in", "ck", "out", "dead"))
    _write_inputs(inputs)

    def run() -> None:
        dep = SparkDeployment(
            spark,
            graph,
            {"pay": f"file:{inputs}"},
            {"charged": f"file:{out}"},
            str(checkpoint),
            dead_letter=str(dead),
            stores=config,
            until_idle=True,
            name="billing-test",
        )
        dep.run(out=io.StringIO())

    run()
    balances, charges, entries = _state(pg_db)
    # Every event but the overdraft applied exactly once, although three queries computed it.
    assert balances == [(1, 100 - 10 - 5 - 1 - 4), (2, 100 - 20 - 30), (3, 100 - 7 - 3)]
    assert charges == sorted(
        [(1, 10, 1), (2, 20, 1), (1, 5, 1), (3, 7, 1), (1, 1, 1), (4, 3, 0), (3, 3, 1), (2, 30, 1), (1, 4, 1)]
    )
    dead_first = _dead_letters(dead)
    assert [(d["stage"], d["event"]) for d in dead_first] == [("UpdateSQL", [2, 500])]
    assert "violates check constraint" in dead_first[0]["reason"]
    assert dead_first[0]["reason"].startswith("store crm (postgresql://")
    assert entries == 10 + 1  # one per event of the UpdateSQL, one per batch of the table

    shutil.rmtree(checkpoint)  # every batch is replayed: same batch ids, same event ids
    run()
    assert _state(pg_db) == (balances, charges, entries)
    assert _dead_letters(dead) == dead_first


def test_materialize_batch_reports_refused_rows_and_skips_a_replay(spark: Any, pg_db: str) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH id integer, total double;
    CREATE DATASTORE crm TYPE postgresql;
    CREATE TABLE bill (id integer PRIMARY KEY, total double) IN crm;
    INSERT INTO TABLE bill SELECT id, total FROM s;
    """
    graph = compile_script(script).graph
    node = next(n for n in graph.nodes if isinstance(n, g.Materialize))
    bindings = bind_stores(graph, {"crm": pg_db})
    assert bindings is not None
    config = replace(bindings, deployment="bills")
    sg = spark_graph(graph, {}, config)
    failed: list[tuple[int, list[Any]]] = []

    def dead_letter(df: Any, batch_id: int) -> None:
        failed.append((batch_id, [(r["reason"], tuple(r["event"])) for r in df.collect()]))

    write = materialize_writer(sg, node, dead_letter)
    batch = spark.createDataFrame([(1, 1.5), (None, 2.0), (3, 3.5)], "id int, total double")
    write(batch, 7)
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("UPDATE bill SET total = 0")
    write(batch, 7)  # a replay of batch 7 writes nothing (the rows keep total = 0)...
    write(spark.createDataFrame([(1, 9.0)], "id int, total double"), 8)  # ...the next batch does
    with psycopg.connect(pg_db) as conn:
        assert conn.execute("SELECT id, total FROM bill ORDER BY id").fetchall() == [(1, 9.0), (3, 0.0)]
    assert [b for b, _ in failed] == [7, 7]  # the replay reports the refused row again
    assert failed[0][1][0][1] == (None, 2.0)
    assert 'null value in column "id"' in failed[0][1][0][0]
