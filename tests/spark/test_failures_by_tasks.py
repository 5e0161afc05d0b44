"""The failures before a window (here a data store call's: its results that do not fit their fields)
are written by the tasks of the query that computes the window (deployer.spark.streams.spool),
not by a `failed:` query of their own that would read every event and call the store again.

The plan has no `failed:` query for them; a run over several micro-batches, resumed from its
checkpoint with more files, writes the reference executor's rows and dead letters, each once, and
counts them; the spool is empty between batches. A node two queries compute is written by the
first of them, once; a failure point whose query a checkpoint of the earlier layout has keeps it:
it resumes as it was.
"""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    T0,
    assert_same,
    assert_same_dead_letters,
    collect,
    compile_text,
    iso,
    physical,
    prepare,
    query_plans,
    run_reference,
    sqlite_rows,
    sqlite_store,
)

from deployer.runner import bind_stores
from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.queries import BY_TASKS, plan_queries, store_kinds
from deployer.spark.translate.graph import SparkGraph
from stores.bindings import StoreBindings

pytestmark = pytest.mark.spark

# fee 2.5 is not an integer: the events of caller 1 are dead-lettered by the ReadSQL (n2), before the window
SCRIPT = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer, ts timestamp TIMESTAMP BY ts;
CREATE DATASTORE crm TYPE sqlite;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan, fee FROM plans WHERE idcaller = ?'
  RETURNS (idplan integer, fee integer);
INSERT INTO priced SELECT k, idcaller, p.idplan AS idplan, p.fee AS fee, ts
  FROM calls ON SQL plan_of, p, idcaller, idplan, fee;
INSERT INTO per_caller SELECT idcaller, count(*) AS c, sum(fee) AS fees
  FROM priced WINDOW TIME SIZE 10 SECONDS GROUP BY idcaller;
"""
TWICE = (
    SCRIPT
    + """
INSERT INTO per_plan SELECT idplan, count(*) AS c FROM priced WINDOW TUPLE SIZE 2 GROUP BY idplan;
"""
)
SOURCES = {"calls": "file:x"}


def _store(path: Path) -> str:
    return sqlite_store(
        path,
        "CREATE TABLE plans (idcaller integer, idplan integer, fee double precision);"
        "INSERT INTO plans VALUES (1, 10, 2.5), (2, 20, 1.0), (3, 30, 3.0), (4, 40, 4.0);",
    )


def _files(n: int, parts: int, start: int = 0) -> list[list[dict[str, Any]]]:
    rows = [
        {"k": i, "idcaller": i % 5, "ts": iso(T0 + timedelta(seconds=3 * i))} for i in range(start, start + n)
    ]
    size = -(-n // parts)
    return [rows[i : i + size] for i in range(0, n, size)]


def test_the_plan_writes_them_from_the_windows_query() -> None:
    plan = plan_queries(compile_text(SCRIPT), ["per_caller"], SOURCES, store_kinds(None))
    names = [q.name for q in plan]
    # the calls' rejected records and late events too: the window's query alone reads them
    assert names == ["sink:per_caller"], names
    assert plan[0].spooled == ("n2", "input-calls", "late-calls")
    assert f"failures of n2{BY_TASKS}" in plan[0].writes


def test_a_node_two_queries_compute_is_written_by_the_first() -> None:
    plan = plan_queries(compile_text(TWICE), ["per_caller", "per_plan"], SOURCES, store_kinds(None))
    # and the calls' rejected records and late events: the first of the queries that read them
    assert [q.name for q in plan] == ["sink:per_caller", "sink:per_plan"]
    assert [q.spooled for q in plan] == [("n2", "input-calls", "late-calls"), ()]


def test_a_checkpoint_of_the_earlier_layout_keeps_its_failure_query() -> None:
    graph = compile_text(SCRIPT)
    plan = plan_queries(graph, ["per_caller"], SOURCES, store_kinds(None), kept={"failed:n2"})
    assert [q.name for q in plan] == ["sink:per_caller", "failed:n2"]
    assert plan[0].spooled == ("input-calls", "late-calls")  # not n2: its own query writes them


def _run(
    spark: Any, tmp: Path, sources: dict[str, str], stores: StoreBindings, ck: Path
) -> tuple[list[str], int, dict[str, str]]:
    graph = compile_text(SCRIPT)
    deployment = SparkDeployment(
        spark,
        graph,
        sources,
        {"per_caller": f"file:{tmp / 'spark-out'}"},
        str(ck),
        dead_letter=f"file:{tmp / 'spark-dead'}",
        stores=stores,
        until_idle=True,
        max_files_per_trigger=1,
    )
    stats = deployment.run(out=io.StringIO())
    return stats.queries, stats.dead_lettered, query_plans(deployment)


@pytest.mark.parametrize("earlier", [False, True], ids=["new", "resumed-from-a-spooling-stage"])
def test_they_are_written_once_across_batches_and_a_resumed_run(
    spark: Any, tmp_path: Path, earlier: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read spools its failures in its own stage (task_spool.InStage); a checkpoint whose first
    batches were run with a spooling stage after the read (`earlier`) resumes with it."""
    graph = compile_text(SCRIPT)
    first, more = _files(30, 3), _files(20, 2, start=30)
    ref = run_reference(
        graph,
        tmp_path / "ref",
        prepare(tmp_path / "all", {"calls": first + more}),
        ["per_caller"],
        bind_stores(graph, {"crm": _store(tmp_path / "ref.sqlite3")}),
    )
    stores = bind_stores(graph, {"crm": _store(tmp_path / "spark.sqlite3")})
    sources = prepare(tmp_path / "spark-in", {"calls": first})
    ck = tmp_path / "ck"
    with monkeypatch.context() as patch:
        if earlier:  # the layout before: a spooling `mapInArrow` after the read's
            patch.setattr(SparkGraph, "spooled_in_stage", lambda *_: None)
        queries, dead, plans = _run(spark, tmp_path, sources, stores, ck)
    assert queries == ["cep:sink:per_caller"], queries
    assert dead == 6  # callers 1 of 30 events: k = 1, 6, ..., 26
    assert physical(plans["cep:sink:per_caller"]).count("MapInArrow") == (2 if earlier else 1)
    prepare(tmp_path / "spark-in", {"calls": more})  # named after the first
    _, dead, plans = _run(spark, tmp_path, sources, stores, ck)
    assert dead == 4
    assert physical(plans["cep:sink:per_caller"]).count("MapInArrow") == 1
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", ["per_caller"])
    assert_same(ref, spk, "per_caller", min_rows=5)
    assert {d["node"] for d in ref.dead} == {"n2"} and len(ref.dead) == 10
    assert_same_dead_letters(ref, spk)
    files = sorted(p.name for p in (tmp_path / "spark-dead").iterdir())
    assert files and all(f.startswith("dead-letter-n2-") for f in files), files
    assert not [p for p in (ck / "spool").rglob("*") if p.is_file()], (
        "the spool keeps no file between batches"
    )


def test_a_node_two_queries_compute_is_written_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both windows' queries call the store and split its failures; the first writes them, the
    second's tasks write nothing. One query at a time: what the second's tasks wrote would stay in
    the spool, after the first had gathered its batches'."""
    monkeypatch.setenv("CEP_MAX_QUERIES", "1")
    graph = compile_text(TWICE)
    sinks = ["per_caller", "per_plan"]
    files = _files(30, 3)
    ref = run_reference(
        graph,
        tmp_path / "ref",
        prepare(tmp_path / "all", {"calls": files}),
        sinks,
        bind_stores(graph, {"crm": _store(tmp_path / "ref.sqlite3")}),
    )
    ck = tmp_path / "ck"
    deployment = SparkDeployment(
        spark,
        graph,
        prepare(tmp_path / "spark-in", {"calls": files}),
        {s: f"file:{tmp_path / 'spark-out'}" for s in sinks},
        str(ck),
        dead_letter=f"file:{tmp_path / 'spark-dead'}",
        stores=bind_stores(graph, {"crm": _store(tmp_path / "spark.sqlite3")}),
        until_idle=True,
        max_files_per_trigger=1,
    )
    stats = deployment.run(out=io.StringIO())
    assert stats.queries == ["cep:sink:per_caller", "cep:sink:per_plan"], stats.queries
    assert stats.dead_lettered == 6
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", sinks)
    assert_same(ref, spk, "per_caller", min_rows=5)
    assert_same(ref, spk, "per_plan", min_rows=5)
    assert {d["node"] for d in ref.dead} == {"n2"} and len(ref.dead) == 6
    assert_same_dead_letters(ref, spk)  # each once: a Counter of them
    assert not [p for p in (ck / "spool").rglob("*") if p.is_file()], "the spool keeps no file"


def test_the_earlier_layouts_checkpoint_resumes_with_its_query(spark: Any, tmp_path: Path) -> None:
    graph = compile_text(SCRIPT)
    stores = bind_stores(graph, {"crm": _store(tmp_path / "spark.sqlite3")})
    ck = tmp_path / "ck"
    (ck / "failed_n2").mkdir(parents=True)  # the earlier layout's query of the ReadSQL's failures
    sources = prepare(tmp_path / "spark-in", {"calls": _files(20, 2)})
    queries, dead, _ = _run(spark, tmp_path, sources, stores, ck)
    assert queries == ["cep:sink:per_caller", "cep:failed:n2"], queries
    assert dead == 4
    assert (ck / "failed_n2" / "commits").is_dir()


# an account's CHECK fails the charges that would overdraw it: those events are dead-lettered by
# the UpdateSQL (n2), before the window; the statements run in event order on both engines
CHARGES = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer, ts timestamp TIMESTAMP BY ts;
CREATE DATASTORE crm TYPE sqlite;
CREATE SQLQUERY charge ON crm AS 'UPDATE accounts SET amount = amount - ? WHERE idcaller = ?';
INSERT INTO charged SELECT k, idcaller, c.n AS n, ts FROM calls ON SQL charge, c, k, idcaller, n;
INSERT INTO per_caller SELECT idcaller, count(*) AS c, sum(n) AS n
  FROM charged WINDOW TIME SIZE 10 SECONDS GROUP BY idcaller;
"""


def _accounts(path: Path) -> str:
    return sqlite_store(
        path,
        "CREATE TABLE accounts (idcaller integer PRIMARY KEY, amount integer CHECK (amount >= 0));"
        "INSERT INTO accounts VALUES (0, 30), (1, 30), (2, 30), (3, 30), (4, 30);",
    )


def test_an_updates_failures_are_spooled_by_its_own_stage(spark: Any, tmp_path: Path) -> None:
    """The UpdateSQL's stage spools the events whose statement failed (task_spool.InStage): the
    reference's rows, dead letters and balances, and no spooling stage after the statements'. One
    store file, made anew for each engine: the dead letters' reasons name it."""
    graph = compile_text(CHARGES)
    files = _files(30, 3)
    db = tmp_path / "crm.sqlite3"
    stores = bind_stores(graph, {"crm": _accounts(db)})
    ref = run_reference(
        graph, tmp_path / "ref", prepare(tmp_path / "all", {"calls": files}), ["per_caller"], stores
    )
    balances = "SELECT idcaller, amount FROM accounts ORDER BY idcaller"
    ref_balances = sqlite_rows(f"sqlite:///{db}", balances)
    db.unlink()
    _accounts(db)
    deployment = SparkDeployment(
        spark,
        graph,
        prepare(tmp_path / "spark-in", {"calls": files}),
        {"per_caller": f"file:{tmp_path / 'spark-out'}"},
        str(tmp_path / "ck"),
        dead_letter=f"file:{tmp_path / 'spark-dead'}",
        stores=stores,
        until_idle=True,
        max_files_per_trigger=1,
    )
    stats = deployment.run(out=io.StringIO())
    assert physical(query_plans(deployment)["cep:sink:per_caller"]).count("MapInArrow") == 1
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", ["per_caller"])
    assert_same(ref, spk, "per_caller", min_rows=5)
    assert {d["node"] for d in ref.dead} == {"n2"} and len(ref.dead) > 5
    assert stats.dead_lettered == len(ref.dead)
    assert_same_dead_letters(ref, spk)
    assert sqlite_rows(f"sqlite:///{db}", balances) == ref_balances
