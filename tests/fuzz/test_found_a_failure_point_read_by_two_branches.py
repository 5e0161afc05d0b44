"""Found by the differential fuzzer (tests/fuzz): seed 8203, cut down to the statements that differed.

A pattern (m17) whose condition fails on one row of its input (`7 % p8` with p8 = 0: division by
zero), read by two Maps (m21, m22) that one Union (u23) merges: the query writing u23 computes the
pattern in both branches (Spark reuses no stateful subtree in a query: deployer/spark/run), and the
tasks of both wrote the failure into the dead-letter spool, under their own partition numbers: two
dead letters on Spark, one on the reference. A spool file is now named by its rows' order keys and
lines (deployer/spark/streams/task_spool.py `file_name`), so the same failures make the same file
wherever a task finds them.
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, b boolean, s varchar, x double, v integer, ts "
        "timestamp TIMESTAMP BY ts WATERMARK 0 SECONDS;\n"
        "INSERT INTO m11 SELECT e1.b AS p3, e1.s AS p4, e2.b AS p5, e2.x AS p6, e2.ts AS p7, "
        "e3.k AS p8, match_time() AS t9, (NOT (e2.b)) AS c10 FROM PATTERN EVERY ((NOT s1 FOR 5 "
        "SECONDS OR e1=s1) -> (e2=s1[(v <= e1.v)] OR e3=s1)) WITHIN 30 SECONDS;\n"
        "INSERT INTO m17 SELECT e1.p4 AS p12, match_time() AS t15 "
        "FROM PATTERN e1=m11[(CAST((7 % p8) AS double) > 1)];\n"
        "INSERT INTO m21 SELECT t15, p12 FROM m17;\n"
        "INSERT INTO m22 SELECT t15, p12 FROM m17;\n"
        "INSERT INTO u23 SELECT * FROM m21, m22;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": null, "b": false, "s": "b", "x": 0.0, "v": 100, "ts": "2026-01-01T00:00:05Z"}',
                    '{"k": 0, "b": true, "s": "b", "x": 2.5, "v": 2, "ts": "2026-01-01T00:01:05Z"}',
                    '{"k": 3, "b": null, "s": "b", "x": 100.125, "v": 10, "ts": "2026-01-01T00:01:06Z"}',
                    '{"k": 7, "b": true, "s": "_", "x": 100.125, "v": 7, "ts": "2026-01-01T00:01:36Z"}',
                    '{"k": -2147483648, "b": false, "s": " a ", "x": 0.0, "v": 0, "ts": '
                    '"2026-01-01T00:01:35.5Z"}',
                    '{"k": -2147483648, "b": false, "s": null, "x": null, "v": 100, "ts": '
                    '"2026-01-01T00:02:05.5Z"}',
                    '{"k": null, "b": true, "s": "b", "x": 2.5, "v": -2147483648, "ts": '
                    '"2026-01-01T00:02:10.5Z"}',
                ],
                ['{"k": null, "b": false, "s": "%", "x": -0.5, "v": 1, "ts": "2026-01-01T00:02:20.5Z"}'],
            ],
        },
        "sinks": ["u23"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"u23": []},
        "mtimes": "reversed",
        "partitions": 1,
        "trigger_clock": None,
    }
)


def test_a_failure_point_read_by_two_branches_dead_letters_once(spark: Any, tmp_path: Any) -> None:
    result = check_case(CASE, spark, None, tmp_path)
    failed = [d for d in result.dead if d["reason"] == "division by zero"]
    assert len(failed) == 1  # the row with p8 = 0, once
