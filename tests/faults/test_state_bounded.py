"""State stays bounded (scenario 14): a TIME window over 200,000 distinct group keys keeps only the
groups of the windows the watermark has not closed, so Spark's state rows level off instead of
growing with the keys seen. (The other half of the scenario, a window whose state nothing expires,
is a compile-time warning: tests/cpl/test_limits.py.)

Every event has a caller of its own; event time advances 10 ms per event, so a micro-batch of
10,000 events spans 100 s of event time against a 10 s window and a 5 s watermark delay.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from cpl.compiler import compile_script
from deployer.spark.handlers import spark_graph
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ, named

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SCRIPT = """
CREATE STREAMSCHEMA calls WITH id bigint, caller bigint, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 5 SECONDS;
INSERT INTO bill SELECT caller, sum(duration) AS total FROM calls WINDOW TIME SIZE 10 SECONDS GROUP BY caller;
"""
PER_BATCH, BATCHES = 10_000, 20  # 200,000 events, 200,000 distinct callers


def test_window_state_levels_off_with_the_watermark(spark: Any, tmp_path: Path) -> None:
    graph = compile_script(SCRIPT).graph
    rate = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", PER_BATCH)
        .option("numPartitions", 2)
        .load()
    )
    v = F.col("value")
    calls = rate.select(
        v.alias(col_name(0)),
        v.alias(col_name(1)),  # a new caller for every event
        (v % 600).cast("int").alias(col_name(2)),
        F.timestamp_millis(v * 10).alias(col_name(3)),
        F.format_string("%020d", v).alias(SEQ),
    )
    # A source declares its stream's watermark where the stream enters (deployer.spark.streams.sources);
    # these events are in event-time order by construction, so no Sequencer is needed.
    calls = calls.withWatermark(col_name(3), "5 seconds")
    sg = spark_graph(graph, {"calls": calls})
    bill = named(sg.port(graph.streams["bill"]), graph.stream_schema("bill"))
    query = (
        bill.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 300
        while query.lastProgress is None or query.lastProgress["batchId"] < BATCHES - 1:
            assert time.monotonic() < deadline, "the query did not get through its batches"
            assert query.exception() is None, query.exception()
            time.sleep(0.1)
        progress = [p for p in query.recentProgress if p["batchId"] < BATCHES]
    finally:
        query.stop()
    rows_in = sum(p["numInputRows"] for p in progress)
    state = [p["stateOperators"][0]["numRowsTotal"] for p in progress if p["numInputRows"]]
    assert rows_in == PER_BATCH * BATCHES
    # The state holds at most the groups of one batch plus the windows still open (15 s of events):
    # never more than a few percent of the 200,000 groups seen...
    assert max(state) <= PER_BATCH + 2_000, state
    # ...and it does not grow as the run goes on: the last batches hold no more than the early ones.
    assert max(state[-5:]) <= 1.2 * max(state[2:8]), state
