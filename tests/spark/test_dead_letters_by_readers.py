"""A source's rejected records and late events, and a stateless operator's failures, are written by
the one query that reads the source or computes the operator (deployer.spark.run.queries._by_readers,
deployer.spark.streams.spool): a deployment of one sink runs one query, where a dead-letters query
used to read every source again and run its Sequencer a second time.

The run writes the reference executor's rows and dead letters (records that do not parse or
convert, an event without event time, late events, a division by zero in a Map), each once, and
counts them as the reference does (late events apart); a checkpoint of the earlier layout, which has
a dead-letters query, resumes with it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    assert_same,
    assert_same_dead_letters,
    call_files,
    collect,
    compile_text,
    prepare,
    run_reference,
)

from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.queries import SINGLE_READERS, plan_queries, store_kinds

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA calls WITH k integer, caller integer, n integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO ratio SELECT k, caller, 100 / n AS r, ts FROM calls;
INSERT INTO per_caller SELECT caller, count(*) AS c, sum(r) AS rs
  FROM ratio WINDOW TIME SIZE 10 SECONDS GROUP BY caller;
"""
SINKS = ["per_caller"]


def _run(
    spark: Any, tmp: Path, sources: dict[str, str], ck: Path, script: str = SCRIPT, sinks: list[str] = SINKS
) -> tuple[list[str], int, int, str]:
    deployment = SparkDeployment(
        spark,
        compile_text(script),
        sources,
        {s: f"file:{tmp / 'spark-out'}" for s in sinks},
        str(ck),
        dead_letter=f"file:{tmp / 'spark-dead'}",
        until_idle=True,
        max_files_per_trigger=1,
    )
    stats = deployment.run(out=io.StringIO())
    plan = deployment.queries[0]._jsq.explainInternal(False)  # StreamingQuery.explain, as text
    return stats.queries, stats.dead_lettered, stats.late, plan


def test_the_plan_has_no_dead_letters_query_for_a_source_one_query_reads() -> None:
    graph = compile_text(SCRIPT)
    ratio = graph.streams["ratio"].node
    plan = plan_queries(graph, SINKS, {"calls": "file:x"}, store_kinds(None))
    assert [q.name for q in plan] == ["sink:per_caller"]
    assert plan[0].spooled == ("input-calls", "late-calls", f"stateless-{ratio}")
    earlier = plan_queries(graph, SINKS, {"calls": "file:x"}, store_kinds(None), kept={"dead-letters"})
    assert [q.name for q in earlier] == ["sink:per_caller", "dead-letters"]
    assert not earlier[0].spooled
    # two queries read the source and compute the Map: the first writes their dead letters
    both = plan_queries(graph, [*SINKS, "ratio"], {"calls": "file:x"}, store_kinds(None))
    assert [q.name for q in both] == ["sink:per_caller", "sink:ratio"]
    assert [q.spooled for q in both] == [("input-calls", "late-calls", f"stateless-{ratio}"), ()]
    # a checkpoint whose dead-letters query wrote those two queries compute keeps it
    between = plan_queries(graph, [*SINKS, "ratio"], {"calls": "file:x"}, store_kinds(None), [SINGLE_READERS])
    assert [q.name for q in between] == ["sink:per_caller", "sink:ratio", "dead-letters"]
    assert not any(q.spooled for q in between)
    assert plan_queries(graph, SINKS, {"calls": "file:x"}, store_kinds(None), [SINGLE_READERS]) == plan


def test_a_source_one_query_computes_twice_keeps_the_dead_letters_query() -> None:
    """A stream merged with itself is read on two paths of its query, which Spark computes apart: its
    tasks would write its dead letters twice (tests/fuzz/test_found_a_stream_merged_with_itself.py)."""
    graph = compile_text(
        "CREATE STREAMSCHEMA s1 WITH k integer, b boolean, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO m1 SELECT k, b, ts FROM s1 WHERE b;\n"
        "INSERT INTO u2 SELECT * FROM m1, s1;\n"
    )
    plan = plan_queries(graph, ["u2"], {"s1": "file:x"}, store_kinds(None))
    assert [q.name for q in plan] == ["sink:u2", "dead-letters"]
    assert not plan[0].spooled


@pytest.mark.parametrize("layout", ["by readers", "earlier"])
def test_the_reading_query_writes_them_once(spark: Any, tmp_path: Path, layout: str) -> None:
    graph = compile_text(SCRIPT)
    files = call_files(4)
    sources = prepare(tmp_path, {"calls": files})  # one directory: a dead letter names its file
    ref = run_reference(graph, tmp_path / "ref", sources, SINKS)
    stages = {d["stage"] for d in ref.dead}
    assert {"input", "Source", "late", "Map"} <= stages, stages
    ck = tmp_path / "ck"
    if layout == "earlier":
        (ck / "dead-letters").mkdir(parents=True)  # the earlier layout's dead-letters query
    queries, dead, late, plan = _run(spark, tmp_path, sources, ck)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", SINKS)
    assert_same(ref, spk, "per_caller", min_rows=4)
    assert_same_dead_letters(ref, spk)
    assert dead == sum(d["stage"] != "late" for d in ref.dead)
    assert late == sum(d["stage"] == "late" for d in ref.dead) == 3
    names = {p.name.rsplit("-", 1)[0] for p in (tmp_path / "spark-dead").iterdir()}
    if layout == "earlier":
        assert queries == ["cep:sink:per_caller", "cep:dead-letters"], queries
        assert names == {"dead-letter-stateless"}, names
        assert not (ck / "dead-letters-by-readers").exists()
    else:
        assert queries == ["cep:sink:per_caller"], queries
        ratio = graph.streams["ratio"].node
        expected = {"dead-letter-input-calls", "dead-letter-late-calls", f"dead-letter-stateless-{ratio}"}
        assert names == expected, names
        assert (ck / "dead-letters-by-readers").exists()
        # a stream alone with WATERMARK 0 passes no Sequencer: its file source marks its late events
        # (deployer.spark.streams.file_source), and its reader's tasks spool them with its rejected
        # records as they read them: the Map's failure split is the plan's only Python stage after
        # the read (a stage that spooled them after the read was another)
        assert "TransformWithState" not in plan and "unpack" not in plan, plan
        assert plan.count("MapInArrow") == 1, plan
        assert (ck / "late-events-marked-by-sources").exists()
    assert not [p for p in (ck / "spool").rglob("*") if p.is_file()], "the spool keeps no file"


@pytest.mark.parametrize("layout", ["by one reader", "between"])
def test_the_first_of_two_readers_writes_them_once(
    spark: Any, tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two queries read the source and compute the Map: the first writes their dead letters, the
    other's tasks pass the same stages and write none; a checkpoint whose dead-letters query wrote
    them (the layout between: marked by readers, not by one reader) resumes with it. One query at a
    time: the second's tasks run after the first has gathered its spool, where what they wrote
    would stay (and the same batches of both, side by side, would write the same files)."""
    monkeypatch.setenv("CEP_MAX_QUERIES", "1")
    graph = compile_text(SCRIPT)
    sinks = [*SINKS, "ratio"]
    sources = prepare(tmp_path, {"calls": call_files(4)})
    ref = run_reference(graph, tmp_path / "ref", sources, sinks)
    ck = tmp_path / "ck"
    if layout == "between":
        (ck / "dead-letters").mkdir(parents=True)
        (ck / "dead-letters-by-readers").touch()
    queries, dead, late, _ = _run(spark, tmp_path, sources, ck, sinks=sinks)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", sinks)
    assert_same(ref, spk, "per_caller", min_rows=4)
    assert_same(ref, spk, "ratio", min_rows=20)
    assert_same_dead_letters(ref, spk)  # each once: a Counter of them
    assert dead == sum(d["stage"] != "late" for d in ref.dead)
    assert late == sum(d["stage"] == "late" for d in ref.dead) == 3
    names = {p.name.rsplit("-", 1)[0] for p in (tmp_path / "spark-dead").iterdir()}
    if layout == "between":
        assert queries == ["cep:sink:per_caller", "cep:sink:ratio", "cep:dead-letters"], queries
        assert names == {"dead-letter-stateless"}, names
        assert not (ck / "dead-letters-by-one-reader").exists()
    else:
        assert queries == ["cep:sink:per_caller", "cep:sink:ratio"], queries
        ratio = graph.streams["ratio"].node
        expected = {"dead-letter-input-calls", "dead-letter-late-calls", f"dead-letter-stateless-{ratio}"}
        assert names == expected, names
        assert (ck / "dead-letters-by-one-reader").exists()
    assert not [p for p in (ck / "spool").rglob("*") if p.is_file()], "the spool keeps no file"


def test_the_shared_query_writes_the_failures_of_its_stateless_operators(spark: Any, tmp_path: Path) -> None:
    """Two stateless sinks read the Map that can fail: the shared query writes them both, and its
    sinks' plans both compute the Map in one job; its tasks write each failure once (the same
    failed rows make the same spool file), where the dead-letters query read the source again."""
    script = SCRIPT + "INSERT INTO high SELECT * FROM ratio WHERE r > 20;\n"
    graph = compile_text(script)
    sinks = ["ratio", "high"]
    ratio = graph.streams["ratio"].node
    plan = plan_queries(graph, sinks, {"calls": "file:x"}, store_kinds(None))
    assert [(q.name, q.spooled) for q in plan] == [
        ("sinks:stateless", ("input-calls", "late-calls", f"stateless-{ratio}"))
    ]
    # a checkpoint of the layout between: the dead-letters query writes them, as it did
    between = plan_queries(graph, sinks, {"calls": "file:x"}, store_kinds(None), [SINGLE_READERS])
    assert [(q.name, q.spooled) for q in between] == [
        ("sinks:stateless", ("input-calls", "late-calls")),
        ("dead-letters", ()),
    ]
    sources = prepare(tmp_path, {"calls": call_files(4)})
    ref = run_reference(graph, tmp_path / "ref", sources, sinks)
    assert sum(d["stage"] == "Map" for d in ref.dead) >= 4
    ck = tmp_path / "ck"
    queries, dead, _, _ = _run(spark, tmp_path, sources, ck, script, sinks)
    assert queries == ["cep:sinks:stateless"], queries
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", sinks)
    assert_same(ref, spk, "ratio", min_rows=20)
    assert_same(ref, spk, "high", min_rows=5)
    assert_same_dead_letters(ref, spk)  # each once: a Counter of them
    assert dead == sum(d["stage"] != "late" for d in ref.dead)
    assert not [p for p in (ck / "spool").rglob("*") if p.is_file()], "the spool keeps no file"


MERGED = """
CREATE STREAMSCHEMA calls WITH k integer, caller integer, n integer, ts timestamp TIMESTAMP BY ts;
CREATE STREAMSCHEMA more WITH k integer, caller integer, n integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO both_ SELECT * FROM calls, more;
INSERT INTO per_caller SELECT caller, count(*) AS c, sum(n) AS s
  FROM both_ WINDOW TUPLE SIZE 3 GROUP BY caller;
"""


def test_the_streams_of_a_merge_spool_their_late_events_as_they_are_unpacked(
    spark: Any, tmp_path: Path
) -> None:
    """Streams that pass their Sequencer together (a Union with event time, read by a TUPLE window:
    its rows depend on the merged order) have their late events spooled as their Sequencer's rows
    are unpacked too, and counted as the reference counts them."""
    graph = compile_text(MERGED)
    sources = prepare(tmp_path, {"calls": call_files(4), "more": call_files(4)})
    ref = run_reference(graph, tmp_path / "ref", sources, SINKS)
    queries, dead, late, plan = _run(spark, tmp_path, sources, tmp_path / "ck", MERGED)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", SINKS)
    assert_same(ref, spk, "per_caller", min_rows=4)
    assert_same_dead_letters(ref, spk)
    assert queries == ["cep:sink:per_caller"], queries
    assert dead == sum(d["stage"] != "late" for d in ref.dead)
    assert late == sum(d["stage"] == "late" for d in ref.dead) == 6
    assert plan.count("unpack_and_spool(") == 2 and "unpack(" not in plan, plan
