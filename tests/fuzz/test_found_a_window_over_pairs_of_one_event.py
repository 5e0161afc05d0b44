"""Found by the differential fuzzer (tests/fuzz): seed 38209, minimized by hand.

A TUPLE window over a join's pairs: one left event pairs with two right events that arrived out of
event-time order (within the right stream's WATERMARK). The reference takes the pairs in the order it
makes them (the right events in their merged order: time, then arrival), Spark took them by the right
event's arrival: the windows differed. Both now order a pair by the left event, then the right one's
time and arrival (deployer/local/join.py, deployer/spark/translate/join.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]


def _e(k: int, v: int, t: str) -> str:
    return json.dumps({"k": k, "v": v, "ts": f"2026-01-01T00:00:{t}Z"})


CASE = Case(
    script="CREATE STREAMSCHEMA l WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA r WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 5 SECONDS;\n"
    "INSERT INTO j SELECT a.k AS k, a.ts AS ts, b.v AS rv FROM l AS a WINDOW TIME SIZE 1 MINUTE, "
    "r AS b WINDOW TIME SIZE 1 MINUTE WHERE a.k = b.k;\n"
    "INSERT INTO w SELECT k, sum(rv) AS s, min(rv) AS first FROM j WINDOW TUPLE SIZE 2 ADVANCE 1 GROUP BY k;\n",
    inputs={
        "l": [[_e(1, 0, "10"), _e(1, 0, "30")]],
        "r": [[_e(1, 3, "13"), _e(1, 1, "11"), _e(1, 2, "12"), _e(1, 4, "40")]],
    },
    sinks=["w"],
    ordered={"w": ["k"]},
    partitions=1,
)


def test_engines_agree(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
