"""The sinks of patterns over the same source streams share one streaming query (deployer.spark.run.
pattern_groups, deployer.spark.patterns.shared): which sinks do, what a checkpoint of that layout
refuses, and that a checkpoint of the layout before, each pattern sink in a query of its own, is
resumed so. The differential tests of patterns (tests/fuzz/test_patterns_on_both_engines.py) and
the restart of open matches (test_spark_pattern_restart.py) run the shared queries against the
reference executor."""

from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    Row,
    assert_same,
    at,
    collect,
    compile_text,
    prepare,
    run_deployment,
    run_reference,
    write_files,
)
from test_checkpoint_manifest import spark_query

from deployer.engine import RunRequest
from deployer.runner import run_script
from deployer.service.reports import OUT_METRIC
from deployer.service.spark_runs import ServiceDeployment
from deployer.spark.run import compat, shared_record
from deployer.spark.run import deployment as spark_deployment
from deployer.spark.run.checkpoint import (
    MANIFEST,
    CheckpointGuard,
    CheckpointRefused,
    arrival_log,
    shared_queries,
)
from deployer.spark.run.layout import refuse_comebacks
from deployer.spark.run.pattern_groups import APART, MARK, split_chain
from deployer.spark.run.queries import plan_queries

STREAMS = """
CREATE STREAMSCHEMA a WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;
CREATE STREAMSCHEMA b WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;
"""
RISES = "INSERT INTO rises SELECT e1.k AS k, e2.v - e1.v AS up FROM PATTERN EVERY e1=a -> e2=b[k = e1.k AND v > e1.v];\n"
QUIET = (
    "INSERT INTO quiet SELECT e1.k AS k, match_time() AS t "
    "FROM PATTERN EVERY e1=a[v > 5] -> NOT b[k = e1.k] FOR 1 SECOND PARTITION BY k;\n"
)
REPEATS = "INSERT INTO repeats SELECT e1.v AS v1, e2.v AS v2 FROM PATTERN EVERY e1=a -> e2=a[v = e1.v];\n"
BIG = "INSERT INTO big SELECT k, v, ts FROM a WHERE v > 3;\n"
ON_BIG = "INSERT INTO onbig SELECT e1.k AS k FROM PATTERN EVERY e1=big -> e2=b[k = e1.k];\n"
LATER = "INSERT INTO later SELECT e1.k AS k FROM SEQUENCE EVERY e1=b, e2=a[k = e1.k];\n"
SCRIPT = STREAMS + RISES + QUIET + REPEATS + BIG + ON_BIG
SOURCES = {"a": "file:/in/a", "b": "file:/in/b"}
SINKS = ["rises", "quiet", "repeats", "onbig"]


def _names(
    script: str, sinks: list[str], kept: frozenset[str] = frozenset(), started: Any = None
) -> dict[str, tuple[str, ...]]:
    graph = compile_text(script)
    return {q.name: q.writes for q in plan_queries(graph, sinks, SOURCES, {}, kept, started)}


def test_the_sinks_of_patterns_over_the_same_streams_share_a_query() -> None:
    plan = _names(SCRIPT, SINKS)
    ab = [w for w in plan["patterns:a+b"] if not w.startswith(("failures", "rejected", "late"))]
    assert ab == ["rises", "quiet"]
    # a pattern alone over its streams has one too, named the same way; one over a stream a
    # statement derives is a sink's query
    assert [w for w in plan["patterns:a"] if w == "repeats"] == ["repeats"]
    assert "sink:onbig" in plan
    assert not any(name.startswith("sink:") for name in plan if name != "sink:onbig")
    # the failures of each pattern are written by the query that writes its rows
    graph = compile_text(SCRIPT)
    patterns = [split_chain(graph, graph.streams[s]) for s in ("rises", "quiet")]
    failures = {f"failures of {found[0].id}" for found in patterns if found is not None}
    assert {w for w in plan["patterns:a+b"] if w.startswith("failures of ")} == failures
    # sinks the checkpoint's started queries wrote stay in them; the others over the same streams
    # share the generation after the last started one, which reads the streams from the beginning
    started = {"patterns:a+b": {"quiet"}, "patterns:a+b~3": {"rises"}, "patterns:a": set()}
    plan = _names(SCRIPT + LATER, [*SINKS, "later"], started=started)
    assert [w for w in plan["patterns:a+b"] if w in SINKS] == ["quiet"]
    assert [w for w in plan["patterns:a+b~3"] if w in SINKS] == ["rises"]
    assert [w for w in plan["patterns:a+b~4"] if w in (*SINKS, "later")] == ["later"]
    assert [w for w in plan["patterns:a~2"] if w in SINKS] == ["repeats"]
    # a checkpoint of the layout before keeps a query per sink
    assert set(_names(SCRIPT, SINKS, frozenset({APART}))) >= {
        "sink:rises",
        "sink:quiet",
        "sink:repeats",
        "sink:onbig",
    }


def compat_keys(queries: dict[str, set[str]]) -> dict[str, list[str]]:
    """Queries -> their sinks as output keys, as a manifest before the record kept them."""
    return {q: [f"sink '{s}'" for s in sorted(sinks)] for q, sinks in queries.items()}


def _ran(d: Path, guard: CheckpointGuard, queries: list[str]) -> None:
    """The queries of a run started, as the deployment and the guard record them."""
    for query in queries:
        if query in guard._shares:
            shared_record.write(
                d, query, [k.removeprefix("sink '").removesuffix("'") for k in guard._shares[query]]
            )
        guard.started(query)


def _started(d: Path, guard: CheckpointGuard, queries: list[str]) -> None:
    """The queries of a first run started, with their state and their sources' arrival logs."""
    _ran(d, guard, queries)
    for query in queries:
        spark_query(d / query.replace(":", "_"))
        (d / query.replace(":", "_") / "state").mkdir()
    for stream in SOURCES:
        arrival_log(d, stream).parent.mkdir(exist_ok=True)
        arrival_log(d, stream).write_text("part-0000.jsonl\n")


def _guard(d: Path, script: str, sinks: list[str]) -> CheckpointGuard:
    guard = CheckpointGuard.open(d, compile_text(script), SOURCES, {s: f"file:/out/{s}" for s in sinks})
    guard.release()
    return guard


def test_a_new_pattern_sink_shares_a_query_of_its_own_and_a_removed_one_cannot_come_back(
    tmp_path: Path,
) -> None:
    d = tmp_path / "cp"
    _started(d, _guard(d, SCRIPT, SINKS), ["patterns:a+b", "patterns:a", "sink:onbig"])
    (d / MARK).touch()  # as the deployment marks a new checkpoint (deployer.spark.run.layout)
    # a new pattern over a and b would miss the events the started query read before: it shares
    # the next query of those streams, which reads them from the beginning
    guard = _guard(d, SCRIPT + LATER, [*SINKS, "later"])
    assert guard._shares["patterns:a+b"] == ["sink 'rises'", "sink 'quiet'"]
    assert guard._shares["patterns:a+b~2"] == ["sink 'later'"]
    # and the run plans it so, from what the checkpoint says the started queries wrote
    record = shared_queries(d)
    assert record.queries == {"patterns:a+b": {"rises", "quiet"}, "patterns:a": {"repeats"}}
    # a checkpoint of `cep run` from before the record: its manifest said the same
    manifest = json.loads((d / MANIFEST).read_text())
    (d / MANIFEST).write_text(json.dumps(manifest | {"patterns": compat_keys(record.queries)}))
    (d / shared_record.RECORD).rename(tmp_path / "record")
    assert shared_queries(d).queries == record.queries
    (tmp_path / "record").rename(d / shared_record.RECORD)
    (d / MANIFEST).write_text(json.dumps(manifest))
    plan = _names(SCRIPT + LATER, [*SINKS, "later"], started=record.queries)
    assert [w for w in plan["patterns:a+b~2"] if w == "later"] == ["later"]
    assert "later" not in plan["patterns:a+b"]
    # one removed: the others' query goes on (its keys are dropped as their timers fire) ...
    _ran(
        d,
        _guard(d, STREAMS + RISES + REPEATS + BIG + ON_BIG, ["rises", "repeats", "onbig"]),
        ["patterns:a+b"],
    )
    assert shared_queries(d).queries["patterns:a+b"] == {"rises"}
    # ... and cannot come back: its query went on without it, and a new one would write its rows again
    with pytest.raises(
        CheckpointRefused, match=r"output sink 'quiet' was written before by a query of pattern"
    ):
        _guard(d, SCRIPT, SINKS)
    with pytest.raises(CheckpointRefused, match=r"the sink\(s\) quiet were written before"):
        refuse_comebacks(
            shared_queries(d),
            plan_queries(compile_text(SCRIPT), SINKS, SOURCES, {}, (), shared_queries(d).queries),
        )
    # the check behind the plan: a sink that joined a started query would be refused
    assert compat.regrouped(
        {"patterns:a+b": ["sink 'rises'"]}, {"patterns:a+b": ["sink 'rises'", "sink 'later'"]}, set(), set()
    ) == [
        "output sink 'later' would join the query patterns:a+b of the pattern sinks sink 'rises', which "
        "resumes where it stopped, so it would miss the events read before"
    ]
    # a checkpoint of the layout before (state, no mark): its run keeps a query per pattern sink,
    # and a new pattern sink is a new query of its own
    old = tmp_path / "old"
    _started(old, _guard(old, STREAMS + RISES + QUIET, ["rises", "quiet"]), ["sink:rises", "sink:quiet"])
    _guard(old, SCRIPT + LATER, [*SINKS, "later"])


def _events(seed: int, n: int = 40) -> list[Row]:
    rng = random.Random(seed)
    t, out = 0, []
    for _ in range(n):
        t += rng.choice([100, 300, 500, 800])
        out.append({"k": rng.randint(1, 3), "v": rng.randint(0, 9), "ts": at(seconds=t / 1000)})
    return out


CUT = at(seconds=9)  # a first run reads the events before it, a second run the others


def _halves(events: dict[str, list[Row]]) -> tuple[dict[str, list[list[Row]]], dict[str, list[list[Row]]]]:
    """Each stream's events before `CUT` and after, as one file each: split at one time, so that
    the end of the first run releases no event of one stream that one of another comes before."""
    first = {s: [[r for r in rows if r["ts"] < CUT]] for s, rows in events.items()}
    second = {s: [[r for r in rows if r["ts"] >= CUT]] for s, rows in events.items()}
    return first, second


def _sink_queries(deployment: Any) -> list[str]:
    return [q.name for q in deployment.plan if q.name.startswith(("sink:", "patterns:"))]


@pytest.mark.spark
def test_a_checkpoint_of_the_layout_before_resumes_a_query_per_pattern_sink(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = compile_text(STREAMS + RISES + QUIET)
    sinks = ["rises", "quiet"]
    events = {s: _events(seed) for seed, s in enumerate("ab", 31)}
    before, after = _halves(events)
    sources = prepare(tmp_path, before)
    checkpoint = tmp_path / "checkpoint"
    # the run of the version before: a query per pattern sink, and no mark of this layout
    earlier = spark_deployment.earlier_layout
    monkeypatch.setattr(spark_deployment, "earlier_layout", lambda cp: earlier(cp) | {APART})
    first = run_deployment(spark, graph, tmp_path, sources, sinks, checkpoint=checkpoint)
    assert _sink_queries(first) == ["sink:rises", "sink:quiet"]
    monkeypatch.undo()
    (checkpoint / MARK).unlink()

    for s, files in after.items():
        write_files(tmp_path / "in" / s, files)
    second = run_deployment(spark, graph, tmp_path, sources, sinks, checkpoint=checkpoint)
    assert _sink_queries(second) == ["sink:rises", "sink:quiet"]
    assert not (checkpoint / MARK).exists()
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", sinks)
    ref = run_reference(graph, tmp_path, sources, sinks)
    # each query resumed where it stopped: no row lost or written twice across the restart
    assert_same(ref, spk, "rises", min_rows=5)
    assert_same(ref, spk, "quiet", min_rows=2)
    # and a new checkpoint of the script shares one query
    fresh = run_deployment(
        spark, graph, tmp_path, sources, sinks, checkpoint=tmp_path / "new", out=tmp_path / "new-out"
    )
    assert _sink_queries(fresh) == ["patterns:a+b"]
    assert_same(
        ref, collect("spark", tmp_path / "new-out", tmp_path / "spark-dead", sinks), "quiet", min_rows=2
    )


@pytest.mark.spark
def test_a_pattern_removed_from_a_shared_query_leaves_the_others_as_they_were(
    spark: Any, tmp_path: Path
) -> None:
    """A pattern sink removed from the script (compat allows it): the shared query resumes without
    it; its keys' timers, set at deadlines the first run's watermark had not passed, fire in the
    second run and are dropped, and the other pattern goes on where it stopped."""
    events = {s: _events(seed) for seed, s in enumerate("ab", 41)}
    before, after = _halves(events)
    sources = prepare(tmp_path, before)
    checkpoint = tmp_path / "checkpoint"
    run_deployment(
        spark,
        compile_text(STREAMS + RISES + QUIET),
        tmp_path,
        sources,
        ["rises", "quiet"],
        checkpoint=checkpoint,
    )
    for s, files in after.items():
        write_files(tmp_path / "in" / s, files)
    alone = compile_text(STREAMS + RISES)
    second = run_deployment(spark, alone, tmp_path, sources, ["rises"], checkpoint=checkpoint)
    assert _sink_queries(second) == ["patterns:a+b"]
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", ["rises"])
    ref = run_reference(alone, tmp_path, sources, ["rises"])
    assert_same(ref, spk, "rises", min_rows=5)
    assert spk.dead == []


def _cep_run(graph: Any, tmp: Path, sources: dict[str, str], sinks: list[str], checkpoint: Path) -> None:
    """`cep run --until-idle --checkpoint` in this process, with its checkpoint guard, into the
    outputs `run_deployment` writes."""
    run_script(
        RunRequest(
            graph=graph,
            sources=sources,
            sinks={s: f"file:{tmp / 'spark-out'}" for s in sinks},
            dead_letter=f"file:{tmp / 'spark-dead'}",
            until_idle=True,
            checkpoint=str(checkpoint),
        ),
        out=io.StringIO(),
    )


@pytest.mark.spark
def test_a_pattern_sink_added_to_a_deployment_reads_its_streams_from_the_beginning(
    spark: Any, tmp_path: Path
) -> None:
    """`cep run` of a script's next version, which adds a pattern sink over the streams its started
    query of pattern sinks reads: the new sink shares a query of its own, which reads them from the
    beginning, and the started query goes on where it stopped. A sink removed, then added again, is
    refused, by `cep run`'s checkpoint guard and by a deployment without one (the service's)."""
    events = {s: _events(seed) for seed, s in enumerate("ab", 51)}
    before, after = _halves(events)
    sources = prepare(tmp_path, before)
    checkpoint = tmp_path / "checkpoint"
    _cep_run(compile_text(STREAMS + RISES + QUIET), tmp_path, sources, ["rises", "quiet"], checkpoint)
    for s, files in after.items():
        write_files(tmp_path / "in" / s, files)
    graph = compile_text(STREAMS + RISES + QUIET + LATER)
    sinks = ["rises", "quiet", "later"]
    _cep_run(graph, tmp_path, sources, sinks, checkpoint)
    assert sorted(p.name for p in checkpoint.glob("patterns_*")) == ["patterns_a+b", "patterns_a+b~2"]
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", sinks)
    ref = run_reference(graph, tmp_path, sources, sinks)
    assert_same(ref, spk, "rises", min_rows=5)
    assert_same(ref, spk, "quiet", min_rows=2)
    # the new sink's rows over every event, those of the first run's input too
    assert_same(ref, spk, "later", min_rows=5)
    assert shared_record.read(checkpoint) == shared_record.SharedRecord(
        {"patterns:a+b": {"rises", "quiet"}, "patterns:a+b~2": {"later"}}, {"rises", "quiet", "later"}
    )
    # quiet removed: both queries go on with new events, without it, so it cannot come back
    for s, seed in (("a", 71), ("b", 72)):
        rng = random.Random(seed)
        later = [
            {"k": rng.randint(1, 3), "v": rng.randint(0, 9), "ts": at(minutes=5, seconds=t)}
            for t in range(12)
        ]
        write_files(tmp_path / "in" / s, [later])
    without = compile_text(STREAMS + RISES + LATER)
    _cep_run(without, tmp_path, sources, ["rises", "later"], checkpoint)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", ["rises", "later"])
    shutil.rmtree(tmp_path / "ref-out")  # the reference's run before, over the files before
    ref = run_reference(without, tmp_path, sources, ["rises", "later"])
    assert_same(ref, spk, "rises", min_rows=6)
    assert_same(ref, spk, "later", min_rows=6)
    with pytest.raises(
        CheckpointRefused, match=r"output sink 'quiet' was written before by a query of pattern"
    ):
        _cep_run(graph, tmp_path, sources, sinks, checkpoint)
    with pytest.raises(CheckpointRefused, match=r"the sink\(s\) quiet were written before"):
        run_deployment(spark, graph, tmp_path, sources, sinks, checkpoint=checkpoint)


@pytest.mark.spark
def test_the_service_counts_the_rows_each_batch_of_a_query_of_pattern_sinks_wrote(
    spark: Any, tmp_path: Path
) -> None:
    """`cep serve` shows a deployment's rows out from its queries' progress; the query of pattern
    sinks writes from batch DataFrames, which report nothing, so its sinks' writers say what they
    wrote: batch by batch, the rows in the sink files (`sink-batch-N.jsonl`)."""
    graph = compile_text(STREAMS + RISES + QUIET)
    sinks = ["rises", "quiet"]
    events = {s: _events(seed) for seed, s in enumerate("ab", 61)}
    # four files a stream, one a micro-batch: rows in several batches
    sources = prepare(
        tmp_path, {s: [rows[10 * i : 10 * i + 10] for i in range(4)] for s, rows in events.items()}
    )
    deployment = ServiceDeployment(
        spark,
        graph,
        sources,
        {s: f"file:{tmp_path / 'spark-out'}" for s in sinks},
        str(tmp_path / "checkpoint"),
        dead_letter=f"file:{tmp_path / 'spark-dead'}",
        until_idle=True,
        max_files_per_trigger=1,
    )
    stats = deployment.run(out=io.StringIO())
    per_batch: dict[int, int] = {}
    for path in (tmp_path / "spark-out").iterdir():
        batch = int(path.stem.partition("-batch-")[2])
        per_batch[batch] = per_batch.get(batch, 0) + sum(1 for line in path.read_text().splitlines() if line)
    (query,) = deployment.queries
    reported = {
        int(p["batchId"]): int(p["observedMetrics"][OUT_METRIC]["rows"])
        for p in deployment.reports(query)
        if OUT_METRIC in (p.get("observedMetrics") or {})
    }
    assert {b: n for b, n in reported.items() if n} == per_batch
    assert len(per_batch) >= 2 and sum(per_batch.values()) == stats.rows_out >= 7
