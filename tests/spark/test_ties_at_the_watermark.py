"""An event at its stream's watermark is not late (docs/language.md, "Semantics of the stateful
operators"); Spark takes a row at or behind its watermark (`ts <= watermark`, a millisecond's grain)
as late (deployer.spark.translate.ties):

- a stream-stream join dropped such a row of its input when the watermark it holds a batch to was
  reached two or more micro-batches before (another file, or an earlier run on the checkpoint):
  found by the fuzzer (docs/fuzzing.md, seed 1824);
- a pattern's matches with `match_time()`, and the rows OUTPUT FIRST lets through, are checked by
  Spark against the watermark of the micro-batch before: a row at it failed the query
  (EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED), e.g. a match that an event at the watermark
  completed, or the first row of a group at it.

Each mark is now on a copy of the event time a microsecond on. A checkpoint whose joins' state was
written without the copy resumes as it was (deployer.spark.run.layout.join_ties); a processor keeps
no copy in its state.

The input, one file a micro-batch: k=1 at 00:00:15, k=2 at 00:00:10 (late), k=3 at 00:00:15 (at the
watermark: not late), k=4 at 00:00:20.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    assert_same,
    assert_same_dead_letters,
    at,
    compile_text,
    prepare,
    run_deployment,
    run_reference,
    run_spark,
    write_files,
)

pytestmark = pytest.mark.spark

STREAM = "CREATE STREAMSCHEMA s WITH k integer, ts timestamp TIMESTAMP BY ts;\n"
PAIRS = "FROM s AS l WINDOW TIME SIZE 1 MINUTE, s AS r WINDOW TIME SIZE 1 MINUTE"
MARK = "joins-take-events-at-the-watermark"
FILES = [[{"k": k, "ts": at(s)}] for k, s in [(1, 15), (2, 10), (3, 15), (4, 20)]]
# the match of k=1 is completed by k=3, at the watermark
PATTERN = (
    "INSERT INTO p SELECT e1.k AS k, match_time() AS t FROM PATTERN EVERY e1=s[k > 0] -> e2=s[k > e1.k];\n"
)
# k=3 is the first of its group at the watermark; after the WHERE, which k=1 (the watermark) does not
# pass, the first row of all
FIRST = "INSERT INTO p SELECT k, ts AS t FROM s GROUP BY k OUTPUT FIRST EVERY 10 SECONDS;\n"
FIRST_KEPT = "INSERT INTO p SELECT k, ts AS t FROM s WHERE k > 1 OUTPUT FIRST EVERY 10 SECONDS;\n"
PROCESSORS = {"pattern": PATTERN, "first": FIRST, "first after a WHERE": FIRST_KEPT}
EMITTED = {
    "pattern": [(1, 15), (3, 20)],
    "first": [(1, 15), (3, 15), (4, 20)],
    "first after a WHERE": [(3, 15)],
}


def _run(
    spark: Any, tmp: Path, script: str, sinks: list[str], partitions: int = 1, files: Any = FILES
) -> tuple[Any, Any]:
    graph = compile_text(STREAM + script)
    sources = prepare(tmp, {"s": files})
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        spk = run_spark(spark, graph, tmp / "spark", sources, sinks, max_files=1)
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions")
    return run_reference(graph, tmp / "ref", sources, sinks), spk


@pytest.mark.parametrize("partitions", [1, 2])
def test_a_keyed_join_pairs_an_event_at_the_watermark(spark: Any, tmp_path: Path, partitions: int) -> None:
    script = f"INSERT INTO j SELECT l.k AS k, r.k AS rk, l.ts AS ts {PAIRS} WHERE l.k = r.k;\n"
    ref, spk = _run(spark, tmp_path, script, ["j"], partitions)
    assert sorted(r["k"] for r in ref["j"]) == [1, 3, 4]  # each on-time event with itself
    assert [d["event"][0] for d in ref.dead if d["stage"] == "late"] == [2]
    assert_same(ref, spk, "j", min_rows=3)
    assert_same_dead_letters(ref, spk)


def test_a_join_without_an_equality_pairs_it_too(spark: Any, tmp_path: Path) -> None:
    """Such a join meets on time buckets (deployer.spark.translate.join._bucketed)."""
    script = f"INSERT INTO j SELECT l.k AS k, r.k AS rk, r.ts AS ts {PAIRS} WHERE l.k >= r.k;\n"
    ref, spk = _run(spark, tmp_path, script, ["j"])
    assert sorted((r["k"], r["rk"]) for r in ref["j"]) == [(1, 1), (3, 1), (3, 3), (4, 1), (4, 3), (4, 4)]
    assert_same(ref, spk, "j", min_rows=6)
    assert_same_dead_letters(ref, spk)


def test_a_window_over_the_join_keeps_its_event_time(spark: Any, tmp_path: Path) -> None:
    """The join's output event time (its left event's, passed through) carries the watermark's mark
    again: a TIME window over it fires as the reference's (once the join's watermark, the merge's less
    a minute, passes its end: k=5 at 00:02:00 moves it), and the predicate and projections read the
    event time itself, not the copy a microsecond on."""
    script = (
        f"INSERT INTO j SELECT l.k AS k, l.ts AS ts {PAIRS} WHERE l.k = r.k AND second(l.ts) >= 15;\n"
        "INSERT INTO w SELECT count(*) AS n, max(ts) AS last FROM j WINDOW TIME SIZE 10 SECONDS;\n"
    )
    ref, spk = _run(spark, tmp_path, script, ["j", "w"], files=[*FILES, [{"k": 5, "ts": at(120)}]])
    assert sorted(r["k"] for r in ref["j"]) == [1, 3, 4]  # k=5's second is 0
    assert [(r["n"], r["last"]) for r in ref["w"]] == [(2, at(15)), (1, at(20))]
    assert_same(ref, spk, "j", min_rows=3)
    assert_same(ref, spk, "w", min_rows=2)


@pytest.mark.parametrize("processor", list(PROCESSORS))
@pytest.mark.parametrize("partitions", [1, 2])
def test_a_processor_emits_a_row_at_the_watermark(
    spark: Any, tmp_path: Path, processor: str, partitions: int
) -> None:
    ref, spk = _run(spark, tmp_path, PROCESSORS[processor], ["p"], partitions)
    assert sorted((r["k"], r["t"]) for r in ref["p"]) == [(k, at(t)) for k, t in EMITTED[processor]]
    assert_same(ref, spk, "p")
    assert_same_dead_letters(ref, spk)


@pytest.mark.parametrize("processor", ["pattern", "first"])
def test_a_window_over_a_processors_rows_keeps_their_event_time(
    spark: Any, tmp_path: Path, processor: str
) -> None:
    """The processor's rows carry the watermark's mark on their event time again (it was on the
    copy Spark checks): a TIME window over them fires as the reference's once k=5 at 00:02:00 moves
    the watermark past it."""
    script = (
        PROCESSORS[processor]
        + "INSERT INTO w SELECT count(*) AS n, max(t) AS last FROM p WINDOW TIME SIZE 10 SECONDS;\n"
    )
    ref, spk = _run(spark, tmp_path, script, ["p", "w"], files=[*FILES, [{"k": 5, "ts": at(120)}]])
    assert len(ref["w"]) >= 2
    assert_same(ref, spk, "p", min_rows=3)
    assert_same(ref, spk, "w", min_rows=2)


@pytest.mark.parametrize("processor", list(PROCESSORS))
def test_a_processor_emits_a_row_at_the_watermark_of_an_earlier_run(
    spark: Any, tmp_path: Path, processor: str
) -> None:
    """Two files, then the other two on the same checkpoint: k=3, at the watermark, comes in the
    second run."""
    graph = compile_text(STREAM + PROCESSORS[processor])
    sources = prepare(tmp_path, {"s": FILES[:2]})
    run_spark(spark, graph, tmp_path, sources, ["p"], checkpoint=tmp_path / "ck", max_files=1)
    write_files(tmp_path / "in" / "s", FILES[2:])
    spk = run_spark(spark, graph, tmp_path, sources, ["p"], checkpoint=tmp_path / "ck", max_files=1)
    ref = run_reference(graph, tmp_path / "ref", sources, ["p"])
    assert sorted((r["k"], r["t"]) for r in ref["p"]) == [(k, at(t)) for k, t in EMITTED[processor]]
    assert_same(ref, spk, "p")


@pytest.mark.parametrize("layout", ["fresh", "earlier"])
def test_a_run_resumes_its_joins_in_the_layout_it_started(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """Two files, then the other two on the same checkpoint: the event at the watermark comes in the
    second run. A checkpoint whose joins' state has no copy of the event time (an earlier layout's)
    resumes with its joins as they were, where Spark drops that event (docs/language.md, "Engines")."""
    from deployer.spark.run import layout as run_layout

    graph = compile_text(STREAM + f"INSERT INTO j SELECT l.k AS k, r.k AS rk {PAIRS} WHERE l.k = r.k;\n")
    sources = prepare(tmp_path, {"s": FILES[:2]})
    ck = tmp_path / "ck"
    with monkeypatch.context() as patch:
        if layout == "earlier":
            patch.setattr(run_layout, "join_ties", lambda checkpoint: False)
        run_spark(spark, graph, tmp_path, sources, ["j"], checkpoint=ck, max_files=1)
    write_files(tmp_path / "in" / "s", FILES[2:])
    spk = run_spark(spark, graph, tmp_path, sources, ["j"], checkpoint=ck, max_files=1)
    ref = run_reference(graph, tmp_path / "ref", sources, ["j"])
    assert sorted(r["k"] for r in ref["j"]) == [1, 3, 4]
    if layout == "fresh":
        assert (ck / MARK).exists()
        assert_same(ref, spk, "j", min_rows=3)
        assert_same_dead_letters(ref, spk)
    else:
        assert not (ck / MARK).exists()
        assert sorted(r["k"] for r in spk["j"]) == [1, 4]


@pytest.mark.parametrize("ties", [True, False])
def test_the_join_state_goes_as_the_watermark_passes(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ties: bool
) -> None:
    """The band is on the copies, so Spark still finds it and evicts each side's state as the
    watermark passes (both layouts): of eight events a minute apart, one file each, the join keeps
    only the last few, not all sixteen rows of its two sides."""
    from deployer.spark.run import layout as run_layout

    if not ties:
        monkeypatch.setattr(run_layout, "join_ties", lambda checkpoint: False)
    graph = compile_text(STREAM + f"INSERT INTO j SELECT l.k AS k, r.k AS rk {PAIRS} WHERE l.k = r.k;\n")
    files = [[{"k": k, "ts": at(60 * k)}] for k in range(1, 9)]
    sources = prepare(tmp_path, {"s": files})
    run = run_deployment(spark, graph, tmp_path, sources, ["j"], max_files=1)
    joins = [
        op
        for q in run.queries
        for p in q.recentProgress
        for op in p["stateOperators"]
        if op["operatorName"] == "symmetricHashJoin"
    ]
    assert len(joins) >= 8
    assert joins[-1]["numRowsTotal"] <= 6, joins[-1]
    assert sum(op["numRowsRemoved"] for op in joins) >= 8
