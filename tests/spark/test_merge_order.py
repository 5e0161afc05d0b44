"""Merges of timed streams on Spark as on the reference, whatever the micro-batches (docs/language.md,
"Merges"; deployer/spark/streams/sequencer.py).

Two streams with event time and different WATERMARKs meet in a Union (one of them through a WHERE)
that feeds a TUPLE window, a BATCH window, an UpdateSQL and an ordered stateless sink. Stream `a`
comes in four files, `b` in two covering the same time: with one file per micro-batch
(`max_files=1`) `b` runs ahead of `a` in every batch (by five minutes, then ten), and a Spark that released each stream on its
own watermark gave the merge `b`'s later events before `a`'s earlier ones. Each case also runs with
every file in one micro-batch. Both streams have events out of order within their WATERMARK (they
wait), late events (dead-lettered), and events at the same time as the other stream's (ties: `a`,
first in FROM, goes first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    Outputs,
    assert_same,
    assert_same_dead_letters,
    at,
    compile_text,
    prepare,
    run_both,
    run_reference,
    run_spark,
    sqlite_rows,
    sqlite_store,
)

from deployer.runner import bind_stores

pytestmark = pytest.mark.spark

Row = dict[str, Any]

STREAMS = """
CREATE STREAMSCHEMA a WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE STREAMSCHEMA b WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 20 SECONDS;
INSERT INTO bb SELECT k, v, ts FROM b WHERE v >= 0;
INSERT INTO merged SELECT * FROM a, bb;
"""

WINDOWS = (
    STREAMS
    + """
INSERT INTO triples SELECT k, min(v) AS lo, max(v) AS hi, count(*) AS n
  FROM merged WINDOW TUPLE SIZE 3 GROUP BY k;
INSERT INTO bursts SELECT k, min(v) AS lo, max(v) AS hi, count(*) AS n
  FROM merged WINDOW BATCH START v % 4 = 0 STOP v % 5 = 0 GROUP BY k;
INSERT INTO minutes SELECT k, count(*) AS n, window_end() AS e FROM a WINDOW TIME SIZE 1 MINUTE GROUP BY k;
"""
)


def _event(k: int, seconds: int, stream: int) -> Row:
    # v grows with event time (and tells the streams apart), so an UpdateSQL that keeps the largest
    # value applies most events in the merged order, and few when one stream runs ahead.
    return {"k": k, "v": 10 * seconds + stream, "ts": at(seconds)}


def inputs() -> dict[str, list[list[Row]]]:
    """`a`: an event every 20 s for 20 minutes, in four files; `b`: every 30 s, in two files. (Each
    micro-batch of a run costs seconds: four files show `b` ahead as well as twelve did.)"""
    a = []
    for i in range(60):
        seconds = 20 * i + (25 if i % 5 == 2 else 0)  # 5 s after the next one: waits for it
        if i % 17 == 16:
            seconds = 20 * i - 150  # behind a's watermark (1 minute): late
        a.append(_event(i % 3, seconds, 0))
    b = []
    for j in range(40):
        seconds = 30 * j + (35 if j % 7 == 3 else 0)  # even j: the time of an event of `a` (a tie)
        if j == 25:
            seconds = 30 * j - 60  # behind b's watermark (20 s): late
        b.append(_event(j % 3, seconds, 1))
    return {"a": [a[f : f + 15] for f in range(0, 60, 15)], "b": [b[:20], b[20:]]}


@pytest.fixture(scope="module")
def windows(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Outputs, Outputs]]:
    """(reference, Spark) with every file in one micro-batch, then with one file per micro-batch."""
    tmp: Path = tmp_path_factory.mktemp("merge-windows")
    sinks = ["merged", "triples", "bursts", "minutes"]
    return [run_both(spark, tmp / f"files-{n}", WINDOWS, inputs(), sinks, max_files=n) for n in (None, 1)]


def test_the_merged_stream_is_written_in_the_merge_order(windows: list[tuple[Outputs, Outputs]]) -> None:
    for ref, spk in windows:
        assert_same(ref, spk, "merged", min_rows=95, ordered=True)
        assert_same_dead_letters(ref, spk)
        assert sorted(r["stream"] for r in spk.dead if r["stage"] == "late") == ["a", "a", "a", "b"]


def test_a_tuple_window_over_a_merge(windows: list[tuple[Outputs, Outputs]]) -> None:
    for ref, spk in windows:
        assert_same(ref, spk, "triples", min_rows=25, ordered=True)


def test_a_batch_window_over_a_merge(windows: list[tuple[Outputs, Outputs]]) -> None:
    for ref, spk in windows:
        assert_same(ref, spk, "bursts", min_rows=5, ordered=True)


def test_a_time_window_over_one_of_the_merged_streams(windows: list[tuple[Outputs, Outputs]]) -> None:
    """`a` alone: its windows close on its own watermark, at the end too (the last minute, which
    that watermark does not pass, is not emitted)."""
    for ref, spk in windows:
        assert_same(ref, spk, "minutes", min_rows=40, ordered=True)


UPDATES = (
    STREAMS
    + """
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY raise ON crm AS 'UPDATE top SET hi = ?, trail = trail || char(32) || ? WHERE k = ? AND hi < ?';
INSERT INTO raised SELECT k, v, ts, r.n FROM merged ON SQL raise, r, v, v, k, v, n;
CREATE TABLE latest (k integer PRIMARY KEY, v integer, ts timestamp) IN crm;
INSERT INTO TABLE latest SELECT k, v, ts FROM merged;
"""
)


def _store(path: Path) -> str:
    return sqlite_store(
        path,
        "CREATE TABLE top (k integer PRIMARY KEY, hi integer, trail text);"
        "INSERT INTO top VALUES (0, 0, ''), (1, 0, ''), (2, 0, '');",
    )


def _tables(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows of `top` (the UpdateSQL's) and of `latest` (the table's: each key's last event)."""
    top = sqlite_rows(url, "SELECT k, hi, trail FROM top ORDER BY k")
    return top, sqlite_rows(url, "SELECT k, v FROM latest ORDER BY k")


@pytest.mark.parametrize("max_files", [None, 1])
def test_update_sql_over_a_merge_runs_in_the_merge_order(
    spark: Any, tmp_path: Path, max_files: int | None
) -> None:
    """The statements run in the merged order: the table ends the same, and every event's affected-row
    count (1 when its value raised its key's, 0 when a larger one came before) is the same. So do the
    upserts of a table: each key keeps its last event in the merged order."""
    graph = compile_text(UPDATES)
    sources = prepare(tmp_path, inputs())
    ref_url, spark_url = _store(tmp_path / "ref.sqlite3"), _store(tmp_path / "spark.sqlite3")
    ref = run_reference(graph, tmp_path / "ref", sources, ["raised"], bind_stores(graph, {"crm": ref_url}))
    spk = run_spark(
        spark,
        graph,
        tmp_path / "spark",
        sources,
        ["raised"],
        max_files=max_files,
        stores=bind_stores(graph, {"crm": spark_url}),
    )
    assert_same(ref, spk, "raised", min_rows=95, ordered=True)
    assert_same_dead_letters(ref, spk)
    assert _tables(spark_url) == _tables(ref_url)
    assert sum(r["n"] for r in ref["raised"]) >= 80  # most events raise their key's value
