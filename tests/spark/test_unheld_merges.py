"""Streams that meet in a Union and whose order shows nowhere (only TIME windows read the merge,
through statements that take each event by itself) pass no Sequencer: each one's file source marks
its late events, and the merge's watermark is Spark's own, the least of its streams'
(deployer.spark.run.held, deployer.spark.streams.file_source). The reference executor merges them in
event-time order and holds them back. Against it: out-of-order and late events on both streams, a
run resumed with one stream silent since (its watermark must still count, though Spark keeps a
stream's own only in memory), a stream that never has an event (empty, or only records it rejects:
the merge must not wait for it at the end of the input), and a merge of streams that never have one.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    T0,
    assert_same,
    assert_same_dead_letters,
    compile_text,
    iso,
    prepare,
    run_reference,
    run_spark,
    sequencer_modes,
    write_files,
)

from deployer.spark.run import held
from deployer.spark.run.checkpoint import CheckpointRefused
from deployer.spark.run.layout import unheld_streams

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA a WITH caller integer, n integer, ts timestamp TIMESTAMP BY ts WATERMARK 4 SECONDS;
CREATE STREAMSCHEMA b WITH caller integer, n integer, ts timestamp TIMESTAMP BY ts WATERMARK 2 SECONDS;
INSERT INTO calls SELECT * FROM a, b;
INSERT INTO priced SELECT caller, n * 2 AS n2, ts FROM calls WHERE n % 7 <> 3;
INSERT INTO per_caller SELECT caller, count(*) AS c, sum(n2) AS s, min(n2) AS lo, max(n2) AS hi
  FROM priced WINDOW TIME SIZE 10 SECONDS GROUP BY caller;
"""
SINKS = ["per_caller"]
SOURCES = {"a": "file:/in/a", "b": "file:/in/b"}


def _files(n: int, base: int, offset: int) -> list[list[Any]]:
    """`n` files of calls `base`+ at 15 s a file, `offset` s into each; from the second on, each
    starts with a call 1.5 s behind the file before's last (out of order, within both WATERMARKs)
    and one 9 s behind it (late on both)."""
    files: list[list[Any]] = []
    for f in range(n):
        rows: list[Any] = [
            {"caller": i % 3, "n": base + 10 * f + i, "ts": iso(T0 + timedelta(seconds=15 * f + offset + s))}
            for i, s in enumerate([0, 1, 3, 6, 9])
        ]
        if f:
            last = timedelta(seconds=15 * (f - 1) + offset + 9)
            rows[:0] = [
                {"caller": 1, "n": base + 500 + f, "ts": iso(T0 + last - timedelta(milliseconds=1500))},
                {"caller": 2, "n": base + 700 + f, "ts": iso(T0 + last - timedelta(seconds=9))},
            ]
        files.append(rows)
    return files


def test_only_a_merge_whose_order_shows_nowhere_is_unheld() -> None:
    graph = compile_text(SCRIPT)
    assert held.unheld(graph, SOURCES, SINKS) == ["a", "b"]
    # the merge, or one of its streams, bound to a sink: the order shows there
    assert held.unheld(graph, SOURCES, [*SINKS, "CALLS"]) == []
    assert held.unheld(graph, SOURCES, [*SINKS, "b"]) == []
    # one of them read from Redis: the whole merge is held back together
    assert held.unheld(graph, {**SOURCES, "b": "redis://localhost:6379/0?stream=b"}, SINKS) == []
    for changed in (
        SCRIPT + "INSERT INTO big SELECT caller, n FROM b WHERE n > 100 OUTPUT LAST EVERY 1 MINUTE;\n",
        SCRIPT.replace("WINDOW TIME SIZE 10 SECONDS", "WINDOW TUPLE SIZE 3"),
        # a join's output depends on the order its inputs meet in
        SCRIPT.replace(
            "INSERT INTO calls SELECT * FROM a, b;",
            "INSERT INTO calls SELECT a.caller AS caller, b.n AS n, a.ts AS ts "
            "FROM a WINDOW TIME SIZE 5 SECONDS, b WINDOW TIME SIZE 5 SECONDS WHERE a.caller = b.caller;",
        ),
    ):
        assert held.unheld(compile_text(changed), SOURCES, SINKS) == [], changed


def test_a_merge_left_unheld_is_not_split_on_resume(tmp_path: Path) -> None:
    """A checkpoint whose queries left `a` unheld cannot go on with `a` merged with a stream they
    held back: the merge's streams would need one stage holding them back together."""
    (tmp_path / "q" / "state").mkdir(parents=True)
    held.record(tmp_path, ["a"])
    with pytest.raises(CheckpointRefused, match="merges it with stream 'b'"):
        unheld_streams(tmp_path, ["a", "b"], [("a", "b")])
    assert unheld_streams(tmp_path, ["a"], []) == {"a"}


@pytest.mark.parametrize("layout", ["unheld", "held back"])
def test_a_merge_resumed_with_one_stream_silent(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """The second run brings files of `a` only: `b`'s watermark is where the first run left it
    (the reference's: an input that ended holds at its last), so the windows up to the least of
    the two fire, as on the reference. So too for a merge the Sequencers hold back (one whose order
    shows somewhere: deployer.spark.streams.merge_sequencer restates each stream's watermark)."""
    if layout == "held back":
        monkeypatch.setattr(held, "unheld", lambda graph, sources, sinks: [])
    graph = compile_text(SCRIPT)
    a, b = _files(6, 0, 0), _files(4, 1000, 5)
    sources = prepare(tmp_path, {"a": a[:3], "b": b})
    ck = tmp_path / "ck"
    run_spark(spark, graph, tmp_path, sources, SINKS, checkpoint=ck, max_files=1)
    write_files(tmp_path / "in" / "a", a[3:])
    spk = run_spark(spark, graph, tmp_path, sources, SINKS, checkpoint=ck, max_files=1)
    ref = run_reference(graph, tmp_path / "ref", sources, SINKS)
    late = sorted(d["event"][1] for d in ref.dead if d["stage"] == "late")
    assert late == [701, 702, 703, 704, 705, 1701, 1702, 1703], late
    assert_same(ref, spk, "per_caller", min_rows=12)
    assert_same_dead_letters(ref, spk)
    assert sequencer_modes(ck) == set()
    assert json.loads((ck / held.RECORD).read_text()) == ([] if layout == "held back" else ["a", "b"])


@pytest.mark.parametrize("silent", ["no file", "only records it rejects"])
def test_a_stream_without_events_does_not_hold_the_merge_back(
    spark: Any, tmp_path: Path, silent: str
) -> None:
    """At the end of the input the reference's merge does not wait for a stream that never had an
    event; Spark counts such a stream's watermark as 0 unless its source sends a placeholder."""
    graph = compile_text(SCRIPT)
    b_files = [] if silent == "no file" else [["not json", {"caller": "x", "n": 1, "ts": iso(T0)}]]
    sources = prepare(tmp_path, {"a": _files(3, 0, 0)})
    write_files(tmp_path / "in" / "b", b_files)
    sources["b"] = f"file:{tmp_path / 'in' / 'b'}"
    spk = run_spark(spark, graph, tmp_path, sources, SINKS, checkpoint=tmp_path / "ck", max_files=1)
    ref = run_reference(graph, tmp_path / "ref", sources, SINKS)
    assert_same(ref, spk, "per_caller", min_rows=6)
    assert_same_dead_letters(ref, spk)
    if b_files:  # both records of `b` dead-lettered, on both engines
        assert len([d for d in ref.dead if d["stage"] == "input"]) == 2


def test_a_merge_of_streams_without_events(spark: Any, tmp_path: Path) -> None:
    """Neither stream has an event: no window, and no watermark moved beyond the events of a later
    run on the same checkpoint, whose windows fire as the reference's."""
    graph = compile_text(SCRIPT)
    sources = prepare(tmp_path, {"a": [], "b": []})
    ck = tmp_path / "ck"
    first = run_spark(spark, graph, tmp_path, sources, SINKS, checkpoint=ck)
    assert first["per_caller"] == []
    write_files(tmp_path / "in" / "a", _files(3, 0, 0))
    write_files(tmp_path / "in" / "b", _files(2, 1000, 5))
    spk = run_spark(spark, graph, tmp_path, sources, SINKS, checkpoint=ck, max_files=1)
    ref = run_reference(graph, tmp_path / "ref", sources, SINKS)
    assert_same(ref, spk, "per_caller", min_rows=6)
    assert_same_dead_letters(ref, spk)
