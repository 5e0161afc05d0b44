"""Found by the differential fuzzer (tests/fuzz): seed 42001 (a 20-minute soak aimed at OUTPUT).

A query that reads one stream in two branches: here `u` merges an OUTPUT-limited copy of `s` (ALL
EVERY 10 SECONDS) with a TUPLE window over `s`. Both branches begin with the same shuffle, and
Spark reused the first (ReusedExchangeExec); its propagation of watermarks between stateful
operators does not look through a reused exchange, so the limiter above it saw the watermark at 0,
never ticked, and `u` had none of its rows on Spark (the reference: all four).

Not the limiter's own defect: a TIME window in its place lost its rows the same way (the second
case, written by hand once the cause was known; it failed with the reuse on). A stateful query with
a watermark in its plan twice reuses no exchange (deployer/spark/run/starting.py,
`reuses_exchanges`; tests/fuzz/test_merges_read_their_sources_once.py counts what it reads).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s WITH k integer, d decimal(8, 2), ts timestamp TIMESTAMP BY ts "
        "WATERMARK 1500 ms;\n"
        "INSERT INTO limited SELECT k, CAST(d AS decimal(18, 2)) AS total FROM s OUTPUT EVERY 10 SECONDS;\n"
        "INSERT INTO pairs SELECT k, sum(d) AS total FROM s WINDOW TUPLE SIZE 2 WHERE k = 12345 GROUP BY k;\n"
        "INSERT INTO u SELECT * FROM pairs, limited;\n",
        "inputs": {
            "s": [
                [
                    '{"k": 0, "d": -1.50, "ts": "2026-01-01T00:00:09.25Z"}',
                    '{"k": -1, "d": 2.50, "ts": "2026-01-01T00:00:26.75Z"}',
                ],
                [
                    '{"k": 7, "d": 1.00, "ts": "2026-01-01T00:00:56.75Z"}',
                    '{"k": 0, "d": -1.50, "ts": "2026-01-01T01:02:18.25Z"}',
                ],
                ['{"k": 5, "d": 0.00, "ts": "2026-01-01T01:02:32.75Z"}'],
            ]
        },
        "sinks": ["u"],
        "max_files": 1,
        "ordered": {"u": []},
        "partitions": 1,
    }
)


# the limited statement's place taken by a TIME window (10 s, per k): four windows, one row each
WINDOWED = dataclasses.replace(
    CASE,
    script=CASE.script.replace(
        "CAST(d AS decimal(18, 2)) AS total FROM s OUTPUT EVERY 10 SECONDS",
        "CAST(sum(d) AS decimal(18, 2)) AS total FROM s WINDOW TIME SIZE 10 SECONDS GROUP BY k",
    ),
)


def test_a_limit_beside_a_window_over_the_same_stream_ticks(spark: Any, tmp_path: Any) -> None:
    ref = check_case(CASE, spark, None, tmp_path)
    assert len(ref.streams["u"]) == 4  # something to compare: every row of `limited`


def test_a_time_window_beside_a_window_over_the_same_stream_closes(spark: Any, tmp_path: Any) -> None:
    assert WINDOWED.script != CASE.script
    ref = check_case(WINDOWED, spark, None, tmp_path)
    assert len(ref.streams["u"]) == 4  # something to compare: every window of the first statement
