"""Event time on Spark as on the reference executor, whatever the micro-batches (docs/language.md,
"Semantics of the stateful operators"; deployer/spark/streams/sequencer.py).

Each case runs the same files through both engines, and Spark twice: reading every file in one
micro-batch, and one file per micro-batch (`max_files=1`), which cuts the input where the earlier
Spark translation went wrong: a WHERE that dropped the last events kept Spark's watermark from
closing the last windows; files read in modification-time order, not name order, made a join lose
pairs; late events were dropped only by stateful operators, judged per micro-batch; TUPLE windows
took a key's events in arrival order across micro-batches.
"""

from __future__ import annotations

import os
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
)

pytestmark = pytest.mark.spark


def _both_ways(
    spark: Any, tmp_path: Path, script: str, inputs: Any, sinks: list[str]
) -> list[tuple[Outputs, Outputs]]:
    """(reference, Spark) with every file in one micro-batch, then with one file per micro-batch."""
    runs = []
    for max_files in (None, 1):
        runs.append(
            run_both(spark, tmp_path / f"files-{max_files}", script, inputs, sinks, max_files=max_files)
        )
    return runs


BILLING = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, duration integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO costs SELECT idcaller, duration * 10 + 10 AS cost, ts FROM cdr WHERE duration >= 10;
INSERT INTO bill SELECT idcaller, sum(cost) AS total, window_end() AS day
  FROM costs WINDOW TIME SIZE 1 DAY GROUP BY idcaller;
"""


def test_the_events_a_where_drops_still_close_windows(spark: Any, tmp_path: Path) -> None:
    """The last events are short calls that the WHERE drops; they are on the next day, so the
    stream's watermark passes the end of the first day and its bills are due, on both engines."""
    day1 = [{"idcaller": c, "duration": 30 + c, "ts": at(hours=h)} for h in range(1, 20, 3) for c in (1, 2)]
    day2_free = [{"idcaller": 1, "duration": 5, "ts": at(days=1, hours=2)}]
    for ref, spk in _both_ways(spark, tmp_path, BILLING, {"cdr": [day1, day2_free]}, ["bill"]):
        assert_same(ref, spk, "bill", min_rows=2)
        assert {r["idcaller"] for r in spk["bill"]} == {1, 2}


JOIN = """
CREATE STREAMSCHEMA calls WITH caller integer, n integer, ts timestamp TIMESTAMP BY ts;
CREATE STREAMSCHEMA topups WITH caller integer, amount integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO paid SELECT c.caller, c.n, t.amount FROM calls c WINDOW TIME SIZE 10 MINUTES,
  topups t WINDOW TIME SIZE 10 MINUTES WHERE c.caller = t.caller;
"""


def _reverse_mtimes(directory: Path) -> None:
    """Give the files modification times in the reverse of their name order (Spark's own file source
    would read them so)."""
    files = sorted(directory.iterdir())
    for i, path in enumerate(reversed(files)):
        os.utime(path, (1_000_000 + i, 1_000_000 + i))


def test_a_join_finds_every_pair_whatever_the_file_times(spark: Any, tmp_path: Path) -> None:
    """Files are read by name whatever their modification times, so no file's events come after a
    later file's and none is late: every pair of the band is found."""
    calls = [
        [{"caller": k % 4, "n": 10 * f + k, "ts": at(minutes=5 * f + k)} for k in range(5)] for f in range(6)
    ]
    topups = [[{"caller": k, "amount": f, "ts": at(minutes=5 * f + 2)} for k in range(4)] for f in range(6)]
    for max_files in (None, 1):
        tmp = tmp_path / f"files-{max_files}"
        graph = compile_text(JOIN)
        sources = prepare(tmp, {"calls": calls, "topups": topups})
        for stream in ("calls", "topups"):
            _reverse_mtimes(tmp / "in" / stream)
        ref = run_reference(graph, tmp, sources, ["paid"])
        spk = run_spark(spark, graph, tmp, sources, ["paid"], max_files=max_files)
        assert_same(ref, spk, "paid", min_rows=40)
        assert spk.dead == ref.dead == []


LATE = """
CREATE STREAMSCHEMA s WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 MINUTE;
INSERT INTO out SELECT k, v, ts FROM s WHERE v >= 0;
INSERT INTO counts SELECT k, count(*) AS n FROM s WINDOW TUPLE SIZE 3 GROUP BY k;
"""


def test_late_events_and_tuple_windows_do_not_depend_on_the_micro_batches(spark: Any, tmp_path: Path) -> None:
    """Out of order within the WATERMARK (taken in event-time order) and beyond it (late: dead-
    lettered, with the reference's reason, from every output), across files."""
    files = [
        [{"k": 1, "v": 1, "ts": at(minutes=10)}, {"k": 1, "v": 2, "ts": at(minutes=9.5)}],
        [{"k": 1, "v": 3, "ts": at(minutes=12)}, {"k": 2, "v": 4, "ts": at(minutes=10.5)}],  # 10.5: late
        [{"k": 1, "v": 5, "ts": at(minutes=11.5)}, {"k": 1, "v": 6, "ts": at(minutes=20)}],
        [{"k": 1, "v": 7, "ts": at(minutes=19.9)}, {"k": 2, "v": 8, "ts": at(minutes=1)}],  # 1: late
    ]
    for ref, spk in _both_ways(spark, tmp_path, LATE, {"s": files}, ["out", "counts"]):
        assert_same(ref, spk, "out", min_rows=5, ordered=True)
        assert_same(ref, spk, "counts", min_rows=2, ordered=True)
        assert_same_dead_letters(ref, spk)
        late = [r for r in spk.dead if r["stage"] == "late"]
        assert len(late) == 2 and all("is behind the watermark" in r["reason"] for r in late)
