"""Checkpoint and restart in the middle of OUTPUT limits' buckets: a run over files A, then a second
run with the same checkpoint after files B arrived, together write what the reference executor
computes over A + B in one run. At the restart a count bucket is part full, each group's FIRST
counter and last time are somewhere in their period, a time bucket holds rows whose tick comes in
B, and a snapshot's groups are live: the limiter carried in Spark's state store
(deployer.spark.output.processor) must lose, repeat and revive none of them, and its order key
must go on from where it stopped (the rows of B come after those of A). So must the buckets of a
LAST over a TIME window, which the window's own aggregation holds
(deployer.spark.windows.time_window_limit), those of an ALL over a TIME window with a HAVING that can fail, which a
second window aggregation of Spark's holds (deployer.spark.output.in_window), and those of a LAST
over a TUPLE window and an ALL over a BATCH window, which the window's processor holds
(deployer.spark.windows.window_limit) with its timers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    assert_same,
    at,
    cdrs,
    compile_text,
    multiset,
    prepare,
    read_jsonl,
    run_reference,
    run_spark,
    split_by_time,
    write_files,
)

from deployer.spark.output.placement import in_window, in_window_aggregation
from operators.output_node import OutputRate

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp
  TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
INSERT INTO sampled SELECT idcaller, duration FROM cdr OUTPUT EVERY 7 EVENTS;
INSERT INTO firsts SELECT idcaller, timestamp FROM cdr GROUP BY idcaller OUTPUT FIRST EVERY 3 EVENTS;
INSERT INTO lasts SELECT idcaller, duration, timestamp FROM cdr GROUP BY idcaller
  OUTPUT LAST EVERY 25 MINUTES;
INSERT INTO board SELECT idcaller, sum(duration) AS total FROM cdr WINDOW TIME SIZE 20 MINUTES
  GROUP BY idcaller OUTPUT SNAPSHOT EVERY 15 MINUTES;
INSERT INTO latest SELECT idcaller, count(*) AS calls FROM cdr WINDOW TIME SIZE 10 MINUTES
  GROUP BY idcaller OUTPUT LAST EVERY 30 MINUTES;
INSERT INTO busy SELECT idcaller, count(*) AS calls FROM cdr WINDOW TIME SIZE 10 MINUTES
  GROUP BY idcaller HAVING 600 / count(*) < 300 OUTPUT ALL EVERY 30 MINUTES;
INSERT INTO recent SELECT idcaller, sum(duration) AS total FROM cdr WINDOW TUPLE SIZE 3
  GROUP BY idcaller OUTPUT LAST EVERY 25 MINUTES;
INSERT INTO spells SELECT idcaller, count(*) AS calls, max(duration) AS longest FROM cdr
  WINDOW BATCH START duration > 100 STOP duration < 60 GROUP BY idcaller OUTPUT ALL EVERY 20 MINUTES;
"""
STREAMS = ["sampled", "firsts", "lasts", "board", "latest", "busy", "recent", "spells"]
RESTART = at(hours=2.1)  # A: the events before it, B: those at or after it


def test_restart_keeps_the_limiters_buckets_and_counters(spark: Any, tmp_path: Path) -> None:
    rows = cdrs(400, seed=41, mean_gap_s=40, callers=6)
    files = split_by_time(rows, "timestamp", [at(hours=1), RESTART, at(hours=3)])
    assert len(files) == 4
    first, second = files[:2], files[2:]
    # the precondition: A's count bucket is part full at the restart (no multiple of 7 events)
    assert sum(len(f) for f in first) % 7 != 0
    graph = compile_text(SCRIPT)
    limits = {s: n for s, p in graph.streams.items() if isinstance(n := graph.node(p.node), OutputRate)}
    assert in_window_aggregation(graph, limits["latest"]) and in_window(graph, limits["busy"])

    sources = prepare(tmp_path, {"cdr": first})
    out, dead, checkpoint = tmp_path / "spark-out", tmp_path / "spark-dead", tmp_path / "checkpoint"
    run_spark(spark, graph, tmp_path, sources, STREAMS, checkpoint=checkpoint, out=out, dead=dead)
    after_first = {s: read_jsonl(out, f"{s}-") for s in STREAMS}
    assert all(after_first[s] for s in STREAMS), "the first run wrote nothing to compare"

    write_files(tmp_path / "in" / "cdr", second)
    spk = run_spark(spark, graph, tmp_path, sources, STREAMS, checkpoint=checkpoint, out=out, dead=dead)
    ref = run_reference(graph, tmp_path, sources, STREAMS)  # A and B in one run, no restart
    for s in STREAMS:
        assert_same(ref, spk, s, min_rows=10, ordered=True)
        # the second run appended to what the first wrote; it did not write it again
        assert spk[s][: len(after_first[s])] == after_first[s]
        assert len(spk[s]) > len(after_first[s]), f"{s}: B let nothing through"
    # the rows held at the restart came out in B: a restart that lost the state would not have them
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    only_b = run_reference(graph, fresh, prepare(fresh, {"cdr": second}), STREAMS)
    assert multiset(spk["sampled"][len(after_first["sampled"]) :]) != multiset(only_b["sampled"])
    assert spk.dead == [] and ref.dead == []
