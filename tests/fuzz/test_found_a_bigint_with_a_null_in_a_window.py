"""Found by the differential fuzzer (tests/fuzz): seed 7516 (20-minute soak).

A BATCH window grouped by `k + 9223372036854775807`, whose groups' keys are NULL for some events
and 2**63 - 1 for another: PySpark hands a stateful processor's integer column with a NULL to
pandas as floats, so the key came back as 2**63 and the micro-batch failed converting it back to
a bigint ("Failed to convert the value of the column '_k0' ... to Arrow type 'int64'"); a key above
2**53 came back rounded. The values had the same fault (`SUMS` below, written by hand): a sum of
bigints with a NULL among them was computed in floats, and one that overflows was not dead-lettered.
Integer columns with a NULL now come as Python ints and NA (deployer/spark/run/session.py,
preferIntExtensionDtype), the events a window holds come back from its state the same way
(deployer/spark/windows/window_state.py), and sums over them are Python's (reduce.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

CASE = case_from_dict(
    {
        "script": "CREATE DATASTORE db TYPE postgresql;\n"
        "CREATE STREAMSCHEMA s1 WITH k integer, x double, ts timestamp TIMESTAMP BY ts;\n"
        "CREATE SQLQUERY weights ON db AS 'SELECT w FROM ref WHERE k = ? ORDER BY w' RETURNS (w "
        "double);\n"
        "CREATE WINDOW w5 AS BATCH START TRUE STOP TRUE;\n"
        "INSERT INTO r2 SELECT * FROM s1 ON OUTER SQL weights, p, k, r1;\n"
        "INSERT INTO a6 SELECT (k + 9223372036854775807) AS g3, count(x) AS a4 FROM r2 WINDOW "
        "w5 GROUP BY (k + 9223372036854775807) HAVING count(*) > 0 OUTPUT FIRST EVERY 1 "
        "EVENTS;\n",
        "inputs": {
            "s1": [
                [
                    "{not json",
                    '{"k": null, "x": null, "ts": "2026-01-01T01:00:00Z"}',
                    '{"k": null, "x": null, "ts": "2026-01-01T02:00:00Z"}',
                    "{not json",
                    "{not json",
                    "{not json",
                    "{not json",
                    "{not json",
                    "{not json",
                    '{"k": null, "x": -0.5, "ts": "2026-01-01T05:00:11Z"}',
                    '{"k": null, "x": null, "ts": "2026-01-01T05:00:16Z"}',
                    '{"k": 0, "x": null, "ts": "2026-01-01T05:00:16.25Z"}',
                    '{"k": null, "x": 0.0, "ts": "2026-01-01T04:59:31.25Z"}',
                    '{"k": null, "x": 100.125, "ts": "2026-01-01T04:59:41.25Z"}',
                    '{"k": 2147483647, "x": -0.5, "ts": "2026-01-01T05:00:11.25Z"}',
                    '{"k": 7, "x": -0.5, "ts": "2026-01-01T05:00:16.25Z"}',
                    '{"k": 3, "x": -0.5, "ts": "2026-01-01T05:00:21.25Z"}',
                    '{"k": 0, "x": 3.0, "ts": "2026-01-01T05:00:21.75Z"}',
                    '{"k": 100, "x": null, "ts": "2026-01-01T05:00:51.75Z"}',
                    '{"k": null, "x": null, "ts": "2026-01-01T05:00:51.75Z"}',
                    '{"k": 10, "x": -0.5, "ts": "2026-01-01T05:01:51.75Z"}',
                    '{"k": null, "x": -0.5, "ts": "2026-01-01T05:01:50.75Z"}',
                    '{"k": null, "x": -0.5, "ts": "2026-01-01T06:01:50.75Z"}',
                ]
            ]
        },
        "sinks": ["a6"],
        "store": "postgresql",
        "tables": [
            {
                "name": "ref",
                "ddl": "CREATE TABLE ref (k integer, a integer, name varchar(20), w double precision)",
                "columns": ("k", "a", "name", "w"),
                "rows": (
                    (0, 10, "zero", 0.5),
                    (1, 11, "one", 1.5),
                    (1, 12, "uno", -2.0),
                    (2, None, "two", None),
                    (3, 13, None, 3.25),
                ),
            }
        ],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"r2": [], "a6": []},
        "mtimes": "increasing",
        "partitions": 1,
        "trigger_clock": None,
    }
)


# the first window's sum overflows (dead-lettered), the second's does not; a group's key above 2**53;
# one file per micro-batch, so that the window holds a NULL in its state between two of them
SUMS = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, n bigint, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO a1 SELECT (k + 9007199254740992) AS g, sum(n) AS t, max(n) AS m FROM s1 WINDOW BATCH "
        "START TRUE STOP (n = 3) GROUP BY (k + 9007199254740992);\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 1, "n": 4611686018427387905, "ts": "2026-01-01T01:00:00Z"}',
                    '{"k": 1, "n": null, "ts": "2026-01-01T01:00:01Z"}',
                ],
                [
                    '{"k": 1, "n": 4611686018427387905, "ts": "2026-01-01T01:00:02Z"}',
                    '{"k": 1, "n": 3, "ts": "2026-01-01T01:00:03Z"}',
                    '{"k": 1, "n": 9007199254740993, "ts": "2026-01-01T01:00:04Z"}',
                ],
                [
                    '{"k": 1, "n": null, "ts": "2026-01-01T01:00:05Z"}',
                    '{"k": 1, "n": 3, "ts": "2026-01-01T01:00:06Z"}',
                    '{"k": null, "n": 3, "ts": "2026-01-01T01:00:07Z"}',
                ],
            ]
        },
        "sinks": ["a1"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 1,
        "ordered": {"a1": []},
        "mtimes": "increasing",
        "partitions": 1,
        "trigger_clock": None,
    }
)


def test_engines_agree_on_sums_of_bigints_with_a_null(spark: Any, postgres_url: str, tmp_path: Any) -> None:
    ref = check_case(SUMS, spark, postgres_url, tmp_path)  # the engines agree: the reference's rows
    assert [tuple(row.values()) for row in ref.streams["a1"]] == [
        (9007199254740993, 9007199254740996, 9007199254740993)
    ]
    assert [d["reason"] for d in ref.dead] == ["integer overflow: sum(n) is out of range for bigint"]


def test_engines_agree_3202a6455c(spark: Any, postgres_url: str, tmp_path: Any) -> None:
    check_case(CASE, spark, postgres_url, tmp_path)
