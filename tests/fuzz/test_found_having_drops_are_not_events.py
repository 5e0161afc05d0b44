"""Found by the differential fuzzer (tests/fuzz): seed 8004 (30-minute soak).

A TUPLE window whose HAVING (count(*) > 1, with SIZE 1) drops every window's row: the reference
counted each dropped row as a filtered event (filtered 2), Spark none. `filtered` counts the events
a WHERE drops (docs/guarantees.md, "Counting events"); the rows a HAVING drops are not events, and
the reference no longer counts them (deployer/local/windows.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, d decimal(8, 2), ts timestamp TIMESTAMP BY ts;\n"
        "CREATE STREAMSCHEMA s2 WITH k integer, d decimal(8, 2), v integer, ts timestamp "
        "TIMESTAMP BY ts;\n"
        "INSERT INTO g4 SELECT k, count(ts) AS a1, sum(d) AS a2, count(v) AS a3 FROM s2 WINDOW "
        "TUPLE SIZE 1 ADVANCE 2 WHERE (coalesce('%', CAST(NULL AS varchar)) NOT LIKE '') GROUP "
        "BY k HAVING count(*) > 1;\n"
        "INSERT INTO g6 SELECT k, sum(k) + 0.5 AS a5 FROM s1 WINDOW TUPLE SIZE 2 WHERE (NOT ((d "
        "BETWEEN d AND d))) GROUP BY k;\n"
        "INSERT INTO m7 SELECT k, CAST('1.25' AS decimal(6, 2)) AS c8 FROM g4 WHERE FALSE;\n",
        "inputs": {
            "s1": [["{not json"]],
            "s2": [
                [
                    '{"k": 0, "d": 1.00, "v": -1, "ts": "2026-01-01T00:00:00Z"}',
                    '{"k": null, "d": 0.00, "v": 10, "ts": "2026-01-01T00:00:00Z"}',
                ]
            ],
        },
        "sinks": ["g6", "m7"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"g4": ["k"], "g6": ["k"], "m7": ["k"]},
        "mtimes": "increasing",
        "partitions": 1,
    }
)


def test_engines_agree_d0e480566a(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
