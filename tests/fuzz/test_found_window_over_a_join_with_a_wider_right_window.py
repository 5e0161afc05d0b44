"""Found by the differential fuzzer (tests/fuzz): seed 38106 (the widened generator's second soak);
issue 38's second class, which the generator found on its own once it drew join windows of any
size and unit, named ones included.

A self-join whose right window (1 minute) is wider than its left (10 seconds), the output carrying
the left event time, and a TIME window over it: at the end of the input the reference fired the
windows up to the merge's watermark less Sl, Spark up to less max(Sl, Sr) (its watermark
propagation through a join takes the least of the two sides' state watermarks), so three windows
were on the reference only. Both now take the larger size (deployer/local/join.py,
docs/language.md "Join").
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

TIMES = [
    "2026-01-01T00:00:10Z",
    "2026-01-01T00:00:40Z",
    "2026-01-01T00:00:41Z",
    "2026-01-01T23:59:59.5Z",
    "2026-01-02T00:00:09.5Z",
    "2026-01-02T00:00:10Z",
    "2026-01-02T00:00:20Z",
    "2026-01-02T00:00:20.25Z",
]
KEYS = [100, 1, 7, 2, 5, 7, 5, 0]

CASE = Case(
    script="CREATE STREAMSCHEMA s1 WITH k integer, x double, ts timestamp TIMESTAMP BY ts WATERMARK 0 SECONDS;\n"
    "CREATE WINDOW w2 AS TIME SIZE 10 SECONDS ADVANCE 5 SECONDS;\n"
    "CREATE WINDOW w3 AS TIME SIZE 1 MINUTES;\n"
    "INSERT INTO j4 SELECT l.k AS k, l.ts AS ts, r.x AS r_x, r.ts AS r_ts FROM s1 AS l WINDOW w2, "
    "s1 AS r WINDOW w3 WHERE l.k = r.k;\n"
    "INSERT INTO a10 SELECT k, count(*) AS n, window_start() AS ws, window_end() AS we FROM j4 "
    "WINDOW TIME SIZE 2 SECOND ADVANCE 1000 MILLISECONDS GROUP BY k;\n",
    inputs={"s1": [[json.dumps({"k": k, "x": 1.5, "ts": t}) for k, t in zip(KEYS, TIMES, strict=True)]]},
    sinks=["j4", "a10"],
    ordered={"a10": ["k"]},
    max_files=1,
    partitions=1,
)


def test_engines_agree(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
