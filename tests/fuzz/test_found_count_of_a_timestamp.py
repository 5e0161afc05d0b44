"""Found by the differential fuzzer (tests/fuzz): seed 3000, shrunk by hand.

count(ts) over a timestamp field in a TUPLE window: Spark gave a timestamp
('1970-01-01T00:00:00.000001Z') where the reference gives the count (1).
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, s varchar, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO g6 SELECT k, count(ts) AS a5, min(ts) AS lo, max(s) AS hi FROM s1 WINDOW "
        "TUPLE SIZE 1 GROUP BY k;\n"
        "INSERT INTO g7 SELECT count(ts) AS a5 FROM s1 WINDOW TUPLE SIZE 2;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 2147483647, "s": null, "ts": "2026-01-01T00:00:00Z"}',
                    '{"k": 1, "s": "a", "ts": "2026-01-01T00:00:01Z"}',
                    '{"k": 1, "s": "b", "ts": null}',
                ]
            ]
        },
        "sinks": ["g6", "g7"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"g6": ["k"], "g7": []},
        "mtimes": "increasing",
        "partitions": 2,
    }
)


def test_engines_agree_eae156997b(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
