"""Found by the differential fuzzer (tests/fuzz): seed 1, shrunk by hand.

A self-join whose condition folds to FALSE, read by a WHERE that folds to NULL: Spark's
optimizer reduced the join condition to a constant and the query failed with "Stream-stream join
without equality predicate is not supported"; the reference emits nothing. Fixed in
deployer/spark/translate/join.py (the residual conjuncts cannot fold the equality away).
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, d integer, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO j1 SELECT l.k AS k, l.ts AS ts, r.d AS rd FROM s1 AS l WINDOW TIME SIZE 30 "
        "SECONDS, s1 AS r WINDOW TIME SIZE 10 SECONDS WHERE l.k = r.k AND FALSE;\n"
        "INSERT INTO m6 SELECT k, rd FROM j1 WHERE (7 % NULL) < 1;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 4, "d": 1, "ts": "2026-01-01T00:00:10Z"}',
                    '{"k": 4, "d": 2, "ts": "2026-01-01T00:00:12Z"}',
                ]
            ]
        },
        "sinks": ["j1", "m6"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {},
        "mtimes": "increasing",
        "partitions": 2,
    }
)


def test_engines_agree_75b59094d4(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
