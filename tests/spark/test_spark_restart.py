"""Checkpoint and restart: a run over files A, then a second run with the same checkpoint after files
B arrived, together write what the reference executor computes over A + B: nothing lost, nothing
written twice, window state carried over the restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    assert_same,
    assert_same_order_per_group,
    at,
    cdrs,
    compile_text,
    prepare,
    read_jsonl,
    run_reference,
    run_spark,
    split_by_time,
    write_files,
)

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp
  TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
INSERT INTO costs SELECT idcaller, duration * 10 + 10 AS cost, timestamp FROM cdr WHERE duration >= 10;
INSERT INTO hourly SELECT idcaller, sum(cost) AS total, count(*) AS calls, window_end() AS we
  FROM costs WINDOW TIME SIZE 1 HOUR GROUP BY idcaller;
INSERT INTO fives SELECT idcaller, sum(cost) AS total, max(timestamp) AS last
  FROM costs WINDOW TUPLE SIZE 3 ADVANCE 5 GROUP BY idcaller;
"""
STREAMS = ["costs", "hourly", "fives"]


def test_restart_resumes_where_it_stopped(spark: Any, tmp_path: Path) -> None:
    rows = cdrs(900, seed=11, mean_gap_s=60, callers=6)
    files = split_by_time(rows, "timestamp", [at(hours=4), at(hours=8), at(hours=12)])
    assert len(files) == 4
    graph = compile_text(SCRIPT)
    first, second = files[:2], files[2:]

    sources = prepare(tmp_path, {"cdr": first})
    out, dead, checkpoint = tmp_path / "spark-out", tmp_path / "spark-dead", tmp_path / "checkpoint"
    run_spark(spark, graph, tmp_path, sources, STREAMS, checkpoint=checkpoint, out=out, dead=dead)
    after_first = {s: read_jsonl(out, f"{s}-") for s in STREAMS}
    assert all(after_first.values()), "the first run wrote every output"

    write_files(tmp_path / "in" / "cdr", second)
    spk = run_spark(spark, graph, tmp_path, sources, STREAMS, checkpoint=checkpoint, out=out, dead=dead)
    # The reference reads the same directory, A and B, in one run.
    ref = run_reference(graph, tmp_path, sources, STREAMS)

    assert_same(ref, spk, "costs", min_rows=500, ordered=True)
    assert_same(ref, spk, "hourly", min_rows=50, ordered=True)
    assert_same_order_per_group(ref, spk, "hourly", ["idcaller"])
    assert_same(ref, spk, "fives", min_rows=50, ordered=True)
    assert_same_order_per_group(ref, spk, "fives", ["idcaller"])
    # The second run appended to what the first wrote; it did not write it again.
    for s in STREAMS:
        assert spk[s][: len(after_first[s])] == after_first[s]
    assert spk.dead == []
