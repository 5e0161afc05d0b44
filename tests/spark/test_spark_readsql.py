"""ReadSQL on Spark equals the reference executor: the paper's Figure 3 and its edge cases.

The lookup table lives in an embedded SQLite store (the default binding), so most tests need no
server; tests/stores covers the same reads on PostgreSQL, and the live-field test runs against it
(its exact column types are what let a ReadSQL leave fields on the JVM).
"""

from __future__ import annotations

import io
import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from spark_helpers import assert_same, assert_same_dead_letters, at, compile_text, prepare, run_both

from deployer.runner import bind_stores
from deployer.spark.datastores import sql as spark_sql
from deployer.spark.handlers import spark_graph
from deployer.spark.run.deployment import SparkDeployment
from operators import graph as g
from operators.analysis import unfit_results
from operators.declarations import DataStore
from stores.bindings import resolve_bindings

pytestmark = pytest.mark.spark


def crm_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """The embedded SQLite store `crm` (the default binding) under tmp_path, made by `script`."""
    data = tmp_path / "data"
    data.mkdir()
    db = sqlite3.connect(data / "crm.sqlite3")
    db.executescript(script)
    db.commit()
    db.close()
    monkeypatch.setenv("CEP_DATA_DIR", str(data))


SCRIPT = """
CREATE STREAMSCHEMA cdr1 WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp
  TIMESTAMP BY timestamp;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan FROM plans WHERE idcaller = ? ORDER BY idplan'
  RETURNS (idplan integer);
INSERT INTO withplan SELECT idcaller, duration, timestamp, p.idplan FROM cdr1 ON SQL plan_of, p, idcaller, idplan;
INSERT INTO everyone SELECT idcaller, q.idplan AS plan FROM cdr1 ON OUTER SQL plan_of, q, idcaller, idplan;
"""


def test_figure_3_multi_row_no_row_and_outer(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # caller 1: one plan; caller 2: two plans (two output rows); caller 3: none
    crm_db(
        tmp_path,
        monkeypatch,
        "CREATE TABLE plans (idcaller integer, idplan integer);"
        "INSERT INTO plans VALUES (1, 10), (2, 20), (2, 21), (4, 40);",
    )
    events = [
        {"idcaller": c, "idreceiver": 9, "duration": 10 * i, "timestamp": at(i)}
        for i, c in enumerate([1, 2, 3, None, 2, 4, 1])
    ]
    config = bind_stores(compile_text(SCRIPT), {})
    ref, spk = run_both(spark, tmp_path, SCRIPT, {"cdr1": [events]}, ["withplan", "everyone"], stores=config)
    assert_same(ref, spk, "withplan", min_rows=7)
    assert_same(ref, spk, "everyone", min_rows=9)
    plans = sorted((r["idcaller"], r["idplan"]) for r in spk["withplan"])
    assert plans == [(1, 10), (1, 10), (2, 20), (2, 20), (2, 21), (2, 21), (4, 40)]
    # OUTER keeps caller 3 and the NULL caller, with a NULL plan
    assert sorted(str(r["idcaller"]) for r in spk["everyone"] if r["plan"] is None) == ["3", "None"]


CACHED = """
CREATE STREAMSCHEMA cdr1 WITH idcaller integer, duration integer, timestamp timestamp;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan FROM plans WHERE idcaller = ?' RETURNS (idplan integer)
  CACHE 100 ROWS;
INSERT INTO withplan SELECT idcaller, p.idplan FROM cdr1 ON SQL plan_of, p, idcaller, idplan;
"""


def test_cache_counters_reach_the_progress_text(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executors' read caches report hits, misses and store loads to the driver (accumulators)."""
    crm_db(
        tmp_path,
        monkeypatch,
        "CREATE TABLE plans (idcaller integer, idplan integer); INSERT INTO plans VALUES (1, 10), (2, 20);",
    )
    graph = compile_text(CACHED)
    events = [{"idcaller": 1 + i % 3, "duration": i, "timestamp": at(i)} for i in range(400)]
    # one micro-batch of one file, handed to the ReadSQL as four Arrow batches of 100 events with
    # the three callers: one task, so one Python worker and one cache sees them all (across
    # micro-batches, a task may get another worker, e.g. when earlier tests left idle ones); the
    # ReadSQL would read them as one batch, so it is told to read 100 events at a time
    monkeypatch.setattr(spark_sql, "READ_BATCH_ROWS", 100)
    sources = prepare(tmp_path, {"cdr1": [events]})
    deployment = SparkDeployment(
        spark,
        graph,
        sources,
        {"withplan": f"file:{tmp_path / 'out'}"},
        str(tmp_path / "ck"),
        dead_letter=f"file:{tmp_path / 'dead'}",
        stores=bind_stores(graph, {}),
        until_idle=True,
    )
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        deployment.run(out=io.StringIO())
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    line = deployment.progress_text()
    found = re.search(r"cache plan_of: (\d+) hits, (\d+) misses, (\d+) loads", line)
    assert found, line
    hits, misses, loads = map(int, found.groups())
    # every event passed the cache once per query that computes the ReadSQL; misses count events,
    # loads count store calls (one per Arrow batch with a miss): the first batch of each query
    # misses all its 100 events in one load, the three later ones hit
    assert (hits + misses) % 400 == 0 and hits + misses > 0, line
    assert hits >= 300 and misses >= 100 and 1 <= loads <= misses, line


NUL_SCRIPT = """
CREATE STREAMSCHEMA ev WITH id integer, name varchar;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY look ON crm AS 'SELECT v FROM lk WHERE name = ? AND v > ?' RETURNS (v integer);
INSERT INTO found SELECT id, l.v AS v FROM ev ON OUTER SQL look, l, name, id, v;
"""


@pytest.mark.postgres
def test_a_nul_in_a_text_parameter_dead_letters_its_event_only(
    spark: Any, tmp_path: Path, pg_db: str
) -> None:
    """Postgres text cannot hold NUL and psycopg will not send it: on both engines that one event is
    dead-lettered with the same reason, and the rest of its batch is read and goes on."""
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE lk (name text, v integer)")
        conn.execute("INSERT INTO lk VALUES ('a', 7), ('b', 8), ('a', 9)")
    events = [
        {"id": 0, "name": "a"},
        {"id": 1, "name": "b\x00"},
        {"id": 2, "name": "\x00"},
        {"id": 3, "name": "b"},
    ]
    config = bind_stores(compile_text(NUL_SCRIPT), {"crm": pg_db})
    ref, spk = run_both(spark, tmp_path, NUL_SCRIPT, {"ev": [events]}, ["found"], stores=config)
    assert_same(ref, spk, "found", min_rows=3)
    assert sorted((r["id"], r["v"]) for r in spk["found"]) == [(0, 7), (0, 9), (3, 8)]
    assert_same_dead_letters(ref, spk)
    assert sorted(d["event"][0] for d in spk.dead) == [1, 2]
    assert all(
        d["stage"] == "ReadSQL" and "parameter 1: PostgreSQL text fields cannot contain NUL" in d["reason"]
        for d in spk.dead
    )


NARROW = """
CREATE STREAMSCHEMA cdr1 WITH idcaller integer, idreceiver integer, duration integer, note varchar,
  timestamp timestamp TIMESTAMP BY timestamp;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan, fee FROM plans WHERE idcaller = ?'
  RETURNS (idplan integer, fee double);
INSERT INTO priced SELECT idcaller, duration * p.fee AS amount FROM cdr1 ON SQL plan_of, p, idcaller, idplan, fee
  WHERE idreceiver > 0;
INSERT INTO ratio SELECT idcaller, duration / q.idplan AS per FROM cdr1 ON SQL plan_of, q, idcaller, idplan, fee;
"""


@pytest.mark.postgres
def test_fields_no_consumer_reads_stay_on_the_jvm_and_dead_letters_keep_the_whole_event(
    spark: Any, tmp_path: Path, pg_db: str
) -> None:
    """After its ReadSQL, `priced` reads idcaller and duration of the event (its WHERE is applied
    before the read): only those cross to Python (the other fields come back as NULLs nobody reads), and its output equals the reference's.
    `ratio`'s division can fail, so its ReadSQL keeps every field: the dead letter of plan 0
    shows the whole event, as the reference's does. PostgreSQL describes idplan (int4) and fee
    (float8) with the types RETURNS declares: no value can fail to fit them, so no result value
    needs the whole event either (operators.analysis.unfit_results)."""
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE plans (idcaller integer, idplan integer, fee double precision)")
        conn.execute("INSERT INTO plans VALUES (1, 10, 2.5), (2, 0, 1.5), (2, 21, 3.0)")
    events = [
        {"idcaller": 1 + i % 3, "idreceiver": i % 4, "duration": 10 * i, "note": f"n'{i}", "timestamp": at(i)}
        for i in range(12)
    ]
    config = resolve_bindings({"crm": DataStore("crm", "postgresql")}, {"crm": pg_db}, {}, tmp_path)
    graph = compile_text(NARROW, config)
    reads = [n for n in graph.nodes if isinstance(n, g.ReadSQL)]
    assert [unfit_results(n) for n in reads] == [(), ()]
    sg = spark_graph(graph, {})
    live = [sg.live(g.Port(n.id)) for n in reads]
    # priced: idcaller, duration and the fee; ratio: all (a dead letter)
    assert sorted(x for x in live if x is not None) == [frozenset({0, 2, 6})] and None in live
    ref, spk = run_both(
        spark, tmp_path, NARROW, {"cdr1": [events]}, ["priced", "ratio"], stores=config, describe=True
    )
    assert_same(ref, spk, "priced", min_rows=6)
    assert_same(ref, spk, "ratio", min_rows=4)
    assert_same_dead_letters(ref, spk)
    # caller 2's events die in ratio's Map (plan 0), with every field of the event and the plan
    dead = [d for d in spk.dead if d["stage"] == "Map"]
    assert len(dead) == 4 and all(d["event"][3].startswith("n'") and d["event"][4] is not None for d in dead)
