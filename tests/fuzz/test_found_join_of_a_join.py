"""Found by the differential fuzzer (tests/fuzz): seed 4000, shrunk by hand.

A join (or a TIME window) over a join's output: Spark failed the query with
MULTIPLE_EVENT_TIME_COLUMNS (both inputs' time columns kept the watermark's mark through the
first join). Fixed in deployer/spark/translate/join.py: only the output's event time carries it.
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO j4 SELECT l.k AS k, l.ts AS ts, r.ts AS r_ts, r.v AS rv FROM s1 AS l "
        "WINDOW TIME SIZE 10 SECONDS, s1 AS r WINDOW TIME SIZE 10 SECONDS WHERE l.k = r.k;\n"
        "INSERT INTO j7 SELECT l.k AS k, l.ts AS ts, l.r_ts AS l_r_ts, r.r_ts AS r_r_ts, r.rv "
        "AS rv FROM j4 AS l WINDOW TIME SIZE 20 SECONDS, j4 AS r WINDOW TIME SIZE 30 SECONDS "
        "WHERE l.k = r.k;\n"
        "INSERT INTO g8 SELECT k, count(*) AS n, window_end() AS we FROM j4 WINDOW TIME SIZE 20 "
        "SECONDS GROUP BY k;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 1, "v": 1, "ts": "2026-01-01T00:00:00Z"}',
                    '{"k": 1, "v": 2, "ts": "2026-01-01T00:00:05Z"}',
                    '{"k": 2, "v": 3, "ts": "2026-01-01T00:00:07Z"}',
                ],
                [
                    '{"k": 1, "v": 4, "ts": "2026-01-01T00:00:12Z"}',
                    '{"k": 2, "v": 5, "ts": "2026-01-01T00:00:30Z"}',
                    '{"k": 1, "v": 6, "ts": "2026-01-01T00:00:41Z"}',
                ],
            ]
        },
        "sinks": ["j7", "g8"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 1,
        "ordered": {"g8": ["k"]},
        "mtimes": "increasing",
        "partitions": 2,
    }
)


def test_engines_agree_c7aba5f718(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
