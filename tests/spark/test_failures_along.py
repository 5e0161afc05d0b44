"""The failures of a window's rows and of a join's pairs, written by the query of the sink or table
that writes those rows (deployer.spark.run.failures): the plan has no `failed:` query for them, and a
run resumed from its checkpoint with more files has the reference executor's dead letters, each
once, its rows and its table. The window read by a second sink through a Map keeps its rows there,
without its failures. (Every differential test with a failing window or join runs this path too.)
"""

from __future__ import annotations

import sqlite3
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
    prepare,
    run_deployment,
    run_reference,
    run_spark,
)

from deployer.runner import bind_stores
from deployer.spark.run.queries import plan_queries, store_kinds

pytestmark = pytest.mark.spark

# Division by zero: `ratios` for a window whose sum(n) is 1, `last_ratio` for one with an m of 0,
# `pairs` for a pair whose b is 0.
SCRIPT = """
CREATE STREAMSCHEMA t WITH k integer, g integer, n integer, m integer, ts timestamp TIMESTAMP BY ts;
CREATE STREAMSCHEMA u WITH k integer, b integer, ts timestamp TIMESTAMP BY ts;
CREATE DATASTORE st TYPE sqlite;
CREATE TABLE last_ratio (g integer PRIMARY KEY, ratio double) IN st;
INSERT INTO ratios SELECT g, 100 / (sum(n) - 1) AS ratio, count(*) AS c
  FROM t WINDOW TUPLE SIZE 2 GROUP BY g HAVING count(*) > 1;
INSERT INTO doubled SELECT g, ratio * 2 AS twice FROM ratios;
INSERT INTO TABLE last_ratio SELECT g, 10 / min(m) AS ratio FROM t WINDOW TUPLE SIZE 3 GROUP BY g;
INSERT INTO pairs SELECT t.k AS k, u.b AS b, t.n / u.b AS q
  FROM t WINDOW TIME SIZE 5 SECONDS, u WINDOW TIME SIZE 5 SECONDS WHERE t.g = u.k;
"""
SINKS = ["ratios", "doubled", "pairs"]


def events(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    t = [
        {"k": i, "g": i % 3, "n": [1, -1, 2, 0, 3][i % 5], "m": i % 7, "ts": iso(T0 + timedelta(seconds=i))}
        for i in range(n)
    ]
    u = [{"k": i % 3, "b": i % 4, "ts": iso(T0 + timedelta(seconds=i + 0.5))} for i in range(0, n, 2)]
    return t, u


def _files(rows: list[dict[str, Any]], parts: int) -> list[list[dict[str, Any]]]:
    size = -(-len(rows) // parts)
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _table(url: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        return sorted(db.execute("SELECT g, ratio FROM last_ratio"))


def test_the_plan_writes_them_with_the_rows() -> None:
    graph = compile_text(SCRIPT)
    plan = plan_queries(graph, SINKS, {"t": "file:x", "u": "file:y"}, store_kinds(None))
    names = [q.name for q in plan]
    assert not [n for n in names if n.startswith("failed:")], names
    writes = {q.name: q.writes for q in plan}
    assert any(w.startswith("failures of ") for w in writes["sink:ratios"])
    assert any(w.startswith("failures of ") for w in writes["table:last_ratio"])
    assert any(w.startswith("failures of ") for w in writes["sink:pairs"])
    assert writes["sink:doubled"] == ("doubled",)


def test_a_resumed_run_neither_repeats_nor_loses_them(spark: Any, tmp_path: Path) -> None:
    t, u = events(60)
    graph = compile_text(SCRIPT)
    t_files, u_files = _files(t, 4), _files(u, 4)
    ref_sources = prepare(tmp_path / "all", {"t": t_files, "u": u_files})
    url = f"sqlite:///{tmp_path}/ref.sqlite3"
    ref = run_reference(graph, tmp_path / "ref", ref_sources, SINKS, bind_stores(graph, {"st": url}))
    # the Spark run sees the first half of the files, then all of them, from one checkpoint
    sources = prepare(tmp_path / "spark-in", {"t": t_files[:2], "u": u_files[:2]})
    stores = bind_stores(graph, {"st": f"sqlite:///{tmp_path}/spark.sqlite3"})
    out, dead, ck = tmp_path / "spark-out", tmp_path / "spark-dead", tmp_path / "ck"
    run_spark(spark, graph, tmp_path, sources, SINKS, checkpoint=ck, out=out, dead=dead, stores=stores)
    first = collect("spark", out, dead, SINKS)
    assert first.dead, "the first half has failures already"
    prepare(tmp_path / "spark-in", {"t": t_files[2:], "u": u_files[2:]})  # named after the first
    run_spark(spark, graph, tmp_path, sources, SINKS, checkpoint=ck, out=out, dead=dead, stores=stores)
    spk = collect("spark", out, dead, SINKS)
    for sink in SINKS:
        assert_same(ref, spk, sink, min_rows=3)
    assert {d.get("node") for d in ref.dead} == {"n3", "n5", "n7"}  # both windows and the join
    assert_same_dead_letters(ref, spk)
    assert _table(url) == _table(f"sqlite:///{tmp_path}/spark.sqlite3") != []


# A window whose rows can fail (10 / sum(n)), then a Map after it that can fail too (100 / (s - 4)):
# the sink's query writes both failure points (`along`), the Map's as one of its chain.
CHAIN = """
CREATE STREAMSCHEMA t WITH g integer, n integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO sums SELECT g, 10 / sum(n) AS q, sum(n) AS s FROM t WINDOW TUPLE SIZE 2 GROUP BY g;
INSERT INTO inv SELECT g, q, 100 / (s - 4) AS r FROM sums;
"""


def test_a_batch_runs_one_job_and_its_failures_more_only_when_it_has_some(spark: Any, tmp_path: Path) -> None:
    """The failed rows of both failure points are counted by observations in the writer's job (the
    one that runs the batch into its cache): a micro-batch without failures runs that job alone, one
    with failures a job more for each failure point that has some (its dead letters), where a count
    job per failure point ran in every micro-batch before. The rows and dead letters are the
    reference executor's."""
    graph = compile_text(CHAIN)
    plan = plan_queries(graph, ["inv"], {"t": "file:x"}, store_kinds(None))
    assert [q.name for q in plan] == ["sink:inv"]  # no failed: query: the sink's writes both
    # one file a micro-batch, each a window of two events per group: (1, 2) and (3, 4) are fine,
    # (1, -1) sums to 0 (the window fails), (2, 2) to 4 (the Map fails)
    sums = [(1, 2), (3, 4), (1, -1), (5, 6), (2, 2), (7, 8), (9, 1)]
    files = [
        [
            {"g": g, "n": n, "ts": iso(T0 + timedelta(seconds=2 * k + j))}
            for j, n in enumerate(pair)
            for g in (1, 2)  # in time order: the stream has no WATERMARK
        ]
        for k, pair in enumerate(sums)
    ]
    sources = prepare(tmp_path / "in", {"t": files})
    ref = run_reference(graph, tmp_path / "ref", sources, ["inv"])
    deployment = run_deployment(spark, graph, tmp_path, sources, ["inv"], max_files=1)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", ["inv"])
    assert_same(ref, spk, "inv", min_rows=8)
    assert_same_dead_letters(ref, spk)
    assert {d["stage"] for d in ref.dead} == {"Aggregate", "Map"}
    (query,) = [q for q in deployment.queries if q.name == "cep:sink:inv"]
    batches = len(query.recentProgress)
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId))
    failing = 2  # the batches of (1, -1) and (2, 2): a dead-letter job each
    assert batches >= len(sums) and len(jobs) <= batches + failing, (len(jobs), batches)
