"""Stateless sinks share one query that reads each input once (deployer.spark.run.shared).

A MultiFilter's three outputs, a Union of two streams and a Map that can fail are written by the
shared query; a TIME window keeps a query of its own. Compared with the reference executor: the
rows of every sink, the dead letters, the count of filtered events; and the shared query's progress
shows each input read once per micro-batch. Then a restart resumes it, and a checkpoint whose
shared sinks differ from the script's is refused.
"""

from __future__ import annotations

import io
import shutil
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    T0,
    assert_same,
    assert_same_dead_letters,
    at,
    cdrs,
    collect,
    compile_text,
    iso,
    prepare,
    read_jsonl,
    run_deployment,
    run_reference,
    split_by_time,
    write_files,
)

from deployer.local.driver import run_local
from deployer.service.reports import OUT_METRIC
from deployer.service.spark_runs import ServiceDeployment
from deployer.spark.run import shared_record
from deployer.spark.run.checkpoint import CheckpointGuard, CheckpointRefused, shared_queries
from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.progress import SparkRunStats
from deployer.spark.run.queries import plan_queries
from deployer.spark.run.shared import batch_plans
from deployer.spark.run.stateless_groups import SHARED_QUERY, stateless_groups
from stores.bindings import resolve_bindings

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA cdr1 WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp
  TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
CREATE STREAMSCHEMA cdr2 WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp
  TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
INSERT INTO free SELECT idcaller, timestamp FROM cdr1 WHERE duration < 10;
INSERT INTO priced SELECT idcaller, duration * 10 + 10 AS cost, timestamp FROM cdr1 WHERE duration >= 10 AND duration < 600;
INSERT INTO marathon SELECT * FROM cdr1 WHERE duration >= 3600;
INSERT INTO hourly SELECT idcaller, count(*) AS calls FROM cdr1 WINDOW TIME SIZE 1 HOUR GROUP BY idcaller;
INSERT INTO both SELECT * FROM cdr1, cdr2;
INSERT INTO per_second SELECT idcaller, 3600 / duration AS rate, timestamp FROM cdr2;
"""
SINKS = ["free", "priced", "marathon", "hourly", "both", "per_second"]
SHARED = ["free", "priced", "marathon", "both", "per_second"]
BOUNDS = [at(hours=3), at(hours=6)]


def _inputs() -> dict[str, list[list[dict[str, Any]]]]:
    files = {
        "cdr1": split_by_time(cdrs(240, seed=3, mean_gap_s=120), "timestamp", BOUNDS),
        "cdr2": split_by_time(cdrs(120, seed=4, mean_gap_s=240), "timestamp", BOUNDS),
    }
    files["cdr1"][1] = [*files["cdr1"][1], "{not json"]  # type: ignore[list-item]
    return files


def _run(
    spark: Any,
    graph: Any,
    tmp: Path,
    sources: dict[str, str],
    kind: type[SparkDeployment] = SparkDeployment,
    wanted: list[str] = SINKS,
) -> tuple[SparkDeployment, SparkRunStats]:
    """As `cep run --checkpoint` does it: the manifest checked, then the queries recorded in it."""
    sinks = {s: f"file:{tmp / 'spark-out'}" for s in wanted}
    guard = CheckpointGuard.open(tmp / "checkpoint", graph, sources, sinks)
    deployment = kind(
        spark,
        graph,
        sources,
        sinks,
        str(tmp / "checkpoint"),
        dead_letter=f"file:{tmp / 'spark-dead'}",
        until_idle=True,
        max_files_per_trigger=1,
        on_started=guard.started,
    )
    try:
        return deployment, deployment.run(out=io.StringIO())
    finally:
        guard.release()


def _lines(directory: Path) -> int:
    return sum(1 for p in directory.iterdir() for line in p.read_text().splitlines() if line.strip())


def test_stateless_sinks_share_one_query_that_reads_each_input_once(spark: Any, tmp_path: Path) -> None:
    graph = compile_text(SCRIPT)
    assert stateless_groups(graph, SINKS) == [(SHARED_QUERY, tuple(SHARED))]
    assert [n.op for n in graph.nodes].count("MultiFilter") == 1
    sources = prepare(tmp_path, _inputs())
    deployment, stats = _run(spark, graph, tmp_path, sources)

    names = {q.name for q in deployment.queries}
    assert names == {f"cep:{SHARED_QUERY}", "cep:sink:hourly"}  # the shared query writes the dead letters
    shared = next(q for q in deployment.queries if q.name.endswith(SHARED_QUERY))
    batches = [p for p in shared.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 3
    # each source of the plan appears once per batch, its rows once: read once for five sinks
    read: dict[str, int] = {}
    for p in batches:
        assert len(p["sources"]) == 2, [s["description"] for s in p["sources"]]
        for s in p["sources"]:
            read[s["description"]] = read.get(s["description"], 0) + s["numInputRows"]
    # every line of every source, and its end-of-input row (an --until-idle run: file_source)
    assert sorted(read.values()) == sorted(_lines(tmp_path / "in" / s) + 1 for s in ("cdr1", "cdr2"))

    ref_stats = run_local(
        graph,
        sources,
        {s: f"file:{tmp_path / 'counted-out'}" for s in SINKS},
        dead_letter=f"file:{tmp_path / 'counted-dead'}",
    )  # for its counts
    ref = run_reference(graph, tmp_path, sources, SINKS)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", SINKS)
    for s in SHARED:
        assert_same(ref, spk, s, min_rows=5, ordered=True)
    assert_same(ref, spk, "hourly", min_rows=10)
    assert_same_dead_letters(ref, spk)
    assert any(r["stage"] == "Map" for r in spk.dead), "division by zero dead-letters some events"
    assert stats.filtered == sum(ref_stats.filtered.values()) > 0
    assert stats.rows_out == sum(len(spk[s]) for s in SINKS)


def test_the_service_reports_the_rows_each_batch_of_the_shared_query_wrote(
    spark: Any, tmp_path: Path
) -> None:
    """`cep serve` shows each deployment's rows out from its queries' progress: the shared query's
    come from what its sink writers say they wrote (deployer.spark.run.shared), the other sinks'
    from an observed metric. Both must be the rows in the sink files, batch by batch."""
    graph = compile_text(SCRIPT)
    sources = prepare(tmp_path, _inputs())
    deployment, stats = _run(spark, graph, tmp_path, sources, ServiceDeployment)
    out = tmp_path / "spark-out"
    per_batch: dict[int, int] = {}
    for path in out.iterdir():
        stream, _, batch = path.stem.partition("-batch-")
        if stream in SHARED:
            per_batch[int(batch)] = per_batch.get(int(batch), 0) + _lines_of(path)
    assert isinstance(deployment, ServiceDeployment)
    reported: dict[str, dict[int, int]] = {}
    for q in deployment.queries:
        for p in deployment.reports(q):
            rows = ((p.get("observedMetrics") or {}).get(OUT_METRIC) or {}).get("rows")
            if rows is not None:
                reported.setdefault(q.name, {})[int(p["batchId"])] = int(rows)
    shared = reported[f"cep:{SHARED_QUERY}"]
    assert {b: n for b, n in shared.items() if n} == per_batch and sum(per_batch.values()) >= 20
    hourly = sum(_lines_of(p) for p in out.glob("hourly-batch-*"))
    assert sum(reported["cep:sink:hourly"].values()) == hourly >= 10
    assert stats.rows_out == sum(per_batch.values()) + hourly


def test_the_service_counts_the_rows_a_sink_or_table_wrote_not_those_dead_lettered(
    spark: Any, tmp_path: Path
) -> None:
    """A sink's query and a table's write the rows of a window through its failure point (an hour's
    calls whose shortest lasted 0 s fail `3600 / min(duration)`): `cep serve`'s rows out are the rows
    in the sink files and in the table, not the window's rows, some of which are dead letters."""
    window = (
        "SELECT idcaller, 3600 / min(duration) AS r FROM cdr1 WINDOW TIME SIZE 1 HOUR GROUP BY idcaller;\n"
    )
    script = SCRIPT.split("INSERT", 1)[0] + "CREATE DATASTORE crm TYPE sqlite;\n"
    script += "CREATE TABLE rates (idcaller integer, r integer) IN crm;\n"
    script += f"INSERT INTO rate {window}INSERT INTO TABLE rates {window}"
    graph = compile_text(script)
    sources = prepare(tmp_path, _inputs())
    deployment = ServiceDeployment(
        spark,
        graph,
        sources,
        {"rate": f"file:{tmp_path / 'spark-out'}"},
        str(tmp_path / "checkpoint"),
        dead_letter=f"file:{tmp_path / 'spark-dead'}",
        stores=resolve_bindings(graph.stores, {}, {}, tmp_path),
        until_idle=True,
        max_files_per_trigger=1,
    )
    stats = deployment.run(out=io.StringIO())
    written = sum(_lines_of(p) for p in (tmp_path / "spark-out").glob("rate-batch-*"))
    failed = read_jsonl(tmp_path / "spark-dead", f"dead-letter-{graph.streams['rate'].node}-")
    assert written >= 10 and len(failed) >= 1, failed
    with sqlite3.connect(tmp_path / "crm.sqlite3") as db:
        (stored,) = db.execute("SELECT count(*) FROM rates").fetchone()
    reported = {
        q.name: sum(
            int(p["observedMetrics"][OUT_METRIC]["rows"])
            for p in deployment.reports(q)
            if OUT_METRIC in (p.get("observedMetrics") or {})
        )
        for q in deployment.queries
    }
    assert reported["cep:sink:rate"] == written == stats.rows_out
    assert reported["cep:table:rates"] == stored == written == stats.applied


def _lines_of(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


NEW = """
INSERT INTO late_comer SELECT idcaller, duration FROM cdr2 WHERE duration > 5;
INSERT INTO early_bird SELECT idcaller, timestamp FROM cdr1 WHERE duration > 100;
"""


def test_a_restart_resumes_the_shared_query_and_new_shared_sinks_read_from_the_beginning(
    spark: Any, tmp_path: Path
) -> None:
    graph = compile_text(SCRIPT)
    files = _inputs()
    first = {s: f[:2] for s, f in files.items()}
    sources = prepare(tmp_path, first)
    _run(spark, graph, tmp_path, sources)
    for s, f in files.items():
        write_files(tmp_path / "in" / s, f[2:])
    deployment, _ = _run(spark, graph, tmp_path, sources)
    shared = next(q for q in deployment.queries if q.name.endswith(SHARED_QUERY))
    # it resumed: it read the new files only (and each source's end-of-input row)
    read = sum(p["numInputRows"] for p in shared.recentProgress)
    assert read == sum(len(f[2]) for f in files.values()) + len(files)
    checkpoint = tmp_path / "checkpoint"
    assert shared_queries(checkpoint).queries == {SHARED_QUERY: set(SHARED)}  # recorded as it started

    # One shared sink fewer: the others resume in the shared query; and so does one left alone
    # (a query of its own would start from the beginning of the input and write everything again).
    CheckpointGuard.open(checkpoint, graph, sources, {s: "file:x" for s in SINKS if s != "priced"}).release()
    CheckpointGuard.open(checkpoint, graph, sources, {"free": "file:x", "hourly": "file:x"}).release()
    alone = plan_queries(graph, ["free"], sources, {}, (), {SHARED_QUERY: {"free"}})
    assert alone[0].name == SHARED_QUERY and alone[0].writes[0] == "free"

    # Two new stateless sinks: joining the started query they would miss what it read, so they
    # share a query of the next generation, which reads the inputs from the beginning, while the
    # started one resumes (and reads nothing new): every row of every sink once.
    more = compile_text(SCRIPT + NEW)
    added = [*SINKS, "late_comer", "early_bird"]
    deployment, _ = _run(spark, more, tmp_path, sources, wanted=added)
    plan = {q.name: q.writes for q in deployment.plan}
    assert [w for w in plan[SHARED_QUERY] if w in added] == SHARED
    assert [w for w in plan[f"{SHARED_QUERY}~2"] if w in added] == ["late_comer", "early_bird"]
    shutil.rmtree(tmp_path / "ref-out", ignore_errors=True)
    ref = run_reference(more, tmp_path, sources, added)
    for s in [*SHARED, "late_comer", "early_bird"]:
        rows = read_jsonl(tmp_path / "spark-out", f"{s}-")
        assert sorted(map(str, rows)) == sorted(map(str, ref[s])), s  # nothing lost, nothing twice
        assert len(rows) >= 5
    # the rejected record is the started query's to write: written once, not again by the new one
    dead = [
        line
        for p in (tmp_path / "spark-dead").rglob("*")
        if p.is_file()
        for line in p.read_text().splitlines()
    ]
    assert sum("{not json" in line for line in dead) == 1
    assert shared_queries(checkpoint).queries[f"{SHARED_QUERY}~2"] == {"late_comer", "early_bird"}

    # A sink removed from the shared query, while it goes on, cannot come back: a new query would
    # write its rows again from the beginning.
    shared_record.write(checkpoint, SHARED_QUERY, [s for s in SHARED if s != "priced"])
    with pytest.raises(CheckpointRefused, match=r"output sink 'priced' was written before by a shared query"):
        CheckpointGuard.open(
            checkpoint, more, sources, {s: "file:x" for s in added}
        )  # `cep run` says so first
    with pytest.raises(
        CheckpointRefused, match=r"the sink\(s\) priced were written before by a shared query"
    ):
        SparkDeployment(spark, more, sources, {s: "file:x" for s in added}, str(checkpoint))
    # The same script resumes.
    shared_record.write(checkpoint, SHARED_QUERY, SHARED)
    CheckpointGuard.open(checkpoint, more, sources, {s: "file:x" for s in added}).release()


def test_batch_graphs_compile_their_columns_once(spark: Any) -> None:
    """The shared query's writer makes a SparkGraph for every micro-batch: with one memo, the second
    batch compiles no Column again, and each batch's sinks hold what a graph of its own gives, less
    the failed rows (dead-lettered by the streaming graph's query, not by the batch graph)."""
    from datetime import datetime

    from pyspark.sql import types as T

    from deployer.spark.handlers import spark_graph
    from deployer.spark.translate.graph import SEQ, SparkGraph, named

    graph = compile_text(SCRIPT)
    schema = T.StructType(
        [
            *(T.StructField(f"_{i}", T.IntegerType()) for i in range(3)),
            T.StructField("_3", T.TimestampType()),
            T.StructField(SEQ, T.StringType()),
        ]
    )

    def frames(seed: int) -> dict[str, Any]:
        out = {}
        for k, stream in enumerate(("cdr1", "cdr2")):
            rows = [
                (
                    c["idcaller"],
                    c["idreceiver"],
                    c["duration"],
                    datetime.fromisoformat(c["timestamp"].replace("Z", "+00:00")),
                    f"{seed}{k}{i:06d}",
                )
                for i, c in enumerate(cdrs(40, seed=seed + k, mean_gap_s=60))
            ]
            rows.append((1, 2, 0, rows[0][3], f"{seed}{k}zero"))  # 3600 / 0 fails in per_second
            out[stream] = spark.createDataFrame(rows, schema)
        return out

    def outputs(sg: SparkGraph) -> dict[str, list[Any]]:
        return {s: sorted(named(sg.port(graph.streams[s]), graph.stream_schema(s)).collect()) for s in SHARED}

    plan = batch_plans(graph)
    sizes = []
    for seed in (5, 6):
        batch = frames(seed)
        shared = plan(batch)
        got = outputs(shared)
        assert shared.memo is not None
        sizes.append(len(shared.memo))
        own = spark_graph(graph, batch)
        assert got == outputs(own)
        assert shared.dead_letters == [] and "Map" in {d.stage for d in own.dead_letters}
        assert sum(len(rows) for rows in got.values()) > 20
    assert sizes[0] > 0 and sizes[1] == sizes[0]


DROPPING = """
CREATE STREAMSCHEMA calls WITH k integer, n integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO big SELECT k, n, ts FROM calls WHERE n > 100;
INSERT INTO neg SELECT k, ts FROM calls WHERE n < 0;
"""


def test_a_batch_whose_events_every_where_drops_runs_no_job_of_its_own(spark: Any, tmp_path: Path) -> None:
    """The shared query runs a batch that no sink's plan ran (a Sequencer's state must commit it);
    a Filter's count of the events it dropped says that a plan ran over the batch, so a batch whose
    events every WHERE drops runs its sinks' job and no count of its own. Its sinks' rows come to
    the driver in one job. Rows and the filtered count are the reference's."""
    graph = compile_text(DROPPING)
    assert stateless_groups(graph, ["big", "neg"]) == [(SHARED_QUERY, ("big", "neg"))]
    files = [
        [
            {
                "k": 4 * f + i,
                "n": (150 if i == 0 else -5 if i == 1 else i) if f % 2 == 0 else 10 * i,
                "ts": iso(T0 + timedelta(seconds=4 * f + i)),
            }
            for i in range(4)
        ]
        for f in range(6)
    ]  # the events of the odd files: every WHERE drops them
    sources = prepare(tmp_path, {"calls": files})
    ref = run_reference(graph, tmp_path / "ref", sources, ["big", "neg"])
    deployment = run_deployment(spark, graph, tmp_path, sources, ["big", "neg"], max_files=1)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", ["big", "neg"])
    assert_same(ref, spk, "big", min_rows=3, ordered=True)
    assert_same(ref, spk, "neg", min_rows=3, ordered=True)
    (query,) = deployment.queries
    batches = len({p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0})
    assert batches >= 6, batches
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId))
    # one job per batch brings both sinks' rows: before, a job per sink and batch (12 for 6), and
    # before that each of the three dropped batches ran a count job more (15)
    assert len(jobs) <= batches, (len(jobs), batches)
