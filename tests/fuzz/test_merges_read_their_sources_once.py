"""A stateful query reuses a shuffle it computes twice when no watermark is in its plan twice
(deployer/spark/run/starting.py, `reuses_exchanges`).

The Sequencers of a merge each read one shuffle of the merge's sources
(deployer/spark/streams/merge_sequencer.py); with reuse off, every Sequencer read and parsed the
sources again: a pattern over three streams read each of them three times per micro-batch. Spark
counts what a query's micro-batches read (`numInputRows` of its progress), so these tests count it
while both engines run the same case and must agree (tests/fuzz/fuzz_harness.check_case): each
source is read once where a watermark is in the plan once, and twice where a stream is read on two
paths after its watermark (fuzzer seed 42001: there a reused shuffle hid the watermark, and reuse
stays off).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case
from keyed_events import keyed_stream
from pyspark.sql.streaming import StreamingQueryListener
from test_found_a_reused_shuffle_hides_the_watermark import CASE as READ_ON_TWO_PATHS

pytestmark = [pytest.mark.spark]


class _InputRows(StreamingQueryListener):
    """The rows each query's micro-batches read, by query name, and the names of those that ended."""

    def __init__(self) -> None:
        self.rows: Counter[str] = Counter()
        self.names: dict[str, str] = {}  # query id -> name
        self.ended: set[str] = set()
        self.changed = threading.Condition()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        with self.changed:
            self.rows[event.progress.name] += event.progress.numInputRows
            self.names[str(event.progress.id)] = event.progress.name

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        with self.changed:
            self.ended.add(self.names.get(str(event.id), ""))
            self.changed.notify_all()


def _read_rows(spark: Any, case: Case, tmp_path: Any, query: str) -> int:
    """Run `case` on both engines (they must agree); the rows Spark's query `query` read. Listener
    events come after the run, in order: its queries' last progress before their end."""
    listener = _InputRows()
    spark.streams.addListener(listener)
    try:
        check_case(case, spark, None, tmp_path)
        with listener.changed:
            assert listener.changed.wait_for(lambda: query in listener.ended, 30), listener.rows
        return listener.rows[query]
    finally:
        spark.streams.removeListener(listener)


def test_a_pattern_over_three_streams_reads_each_once(spark: Any, tmp_path: Any) -> None:
    rng = random.Random(4)
    inputs = {s: keyed_stream(rng, 40, s == "b") for s in ("a", "b", "c")}
    case = Case(
        script="CREATE STREAMSCHEMA a WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
        "CREATE STREAMSCHEMA b WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;\n"
        "CREATE STREAMSCHEMA c WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO atmost SELECT e1.k AS k, count(e2.v) AS n, e2[last].v AS l, e3.v AS v3 "
        "FROM PATTERN EVERY e1=b[v = 9] -> e2=a<:2> -> e3=c PARTITION BY k;\n",
        inputs=inputs,
        sinks=["atmost"],
        ordered={"atmost": ["k"]},
        max_files=1,
    )
    events = sum(len(f) for files in inputs.values() for f in files)
    # each event once, and each stream's end-of-input row (deployer/spark/streams/file_source.py)
    # (a pattern's sink is written by the query of the patterns over its streams: deployer.spark.run.pattern_groups)
    assert _read_rows(spark, case, tmp_path, "cep:patterns:a+b+c") == events + 3


def test_a_stream_read_on_two_paths_after_its_watermark_is_read_twice(spark: Any, tmp_path: Any) -> None:
    events = sum(len(f) for f in READ_ON_TWO_PATHS.inputs["s"])
    assert _read_rows(spark, READ_ON_TWO_PATHS, tmp_path, "cep:sink:u") == 2 * (events + 1)
