"""Found by the differential fuzzer (tests/fuzz): seed 5000.

A sliding TIME window (SIZE 30 s, ADVANCE 5 s) into a table keyed by the group: several windows of
one key close in the same micro-batch, and the last one upserted wins. Spark upserted them in the
order its shuffle left them (the table kept the window ending at 00:00:25); the reference in window
order (the one ending at 00:00:35, the last the final watermark closes). A table's batch is now
written in the reference's order, event time then `SEQ` (deployer/spark/datastores/materialize.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE DATASTORE db TYPE sqlite;\n"
        "CREATE STREAMSCHEMA s1 WITH k integer, n bigint, ts timestamp TIMESTAMP BY ts "
        "WATERMARK 5 SECONDS;\n"
        "CREATE STREAMSCHEMA s2 WITH k integer, s varchar, b boolean, v integer;\n"
        "CREATE TABLE t6 (k integer, a1 integer, a2 double, a3 bigint, ws4 timestamp, we5 "
        "timestamp, PRIMARY KEY (k)) IN db;\n"
        "CREATE TABLE t13 (k integer, a12 double) IN db;\n"
        "INSERT INTO TABLE t6 SELECT k, min(k) AS a1, count(n) + 0.5 AS a2, sum(n) AS a3, "
        "window_start() AS ws4, window_end() AS we5 FROM s1 WINDOW TIME SIZE 30 SECONDS ADVANCE "
        "5 SECONDS WHERE (NOT ((1.5 <= 0.1))) GROUP BY k HAVING count(*) > 0;\n"
        "INSERT INTO m7 SELECT *, (NULL NOT BETWEEN CASE WHEN (TIMESTAMP '2026-01-01 00:00:00' "
        "IS NOT NULL) THEN CAST('1.25' AS decimal(6, 2)) ELSE round(CAST('1.25' AS decimal(6, "
        "2)), 0) END AND CAST('0.001' AS decimal(6, 3))) AS c8, (nullif(v, ceil(CAST('0.001' AS "
        "decimal(6, 3)))) BETWEEN (-k) AND v) AS c9, 0.5 AS c10 FROM s2 WHERE (b);\n"
        "INSERT INTO j11 SELECT l.k AS k, l.ts AS ts, r.ts AS r_ts FROM s1 AS l WINDOW TIME "
        "SIZE 10 SECONDS, s1 AS r WINDOW TIME SIZE 30 SECONDS WHERE l.k = r.k;\n"
        "INSERT INTO TABLE t13 SELECT k, min(k) + 0.5 AS a12 FROM s1 WINDOW BATCH START (NOT "
        "(FALSE)) STOP (TIMESTAMP '2025-12-31 23:59:59' < TIMESTAMP '2026-01-01 00:00:00') "
        "WHERE FALSE GROUP BY k;\n",
        "inputs": {
            "s1": [
                [],
                [
                    '{"k": 2, "n": null, "ts": "2026-01-01T00:00:00Z"}',
                    '{"k": 2, "n": 0, "ts": "2026-01-01T00:00:10Z"}',
                ],
                [],
                ['{"k": 3, "n": 1000, "ts": "2026-01-01T00:00:40Z"}'],
            ],
            "s2": [
                [
                    '{"k": 2147483647, "s": "b", "b": true, "v": 2147483647}',
                    '{"k": 4, "s": " a ", "b": null, "v": 2147483647}',
                    '{"k": 2, "s": "_", "b": true, "v": 10}',
                ],
                [
                    '{"k": 0, "s": " a ", "b": null, "v": 10}',
                    '{"k": null, "s": "b", "b": true, "v": -1}',
                    '{"k": 4, "s": "é", "b": false, "v": 7}',
                    '{"k": 0, "s": "b", "b": null, "v": 0}',
                    '{"k": null, "s": null, "b": false, "v": 2147483647}',
                    '{"k": 100, "s": "10", "b": true, "v": "abc"}',
                    '{"k": 5, "s": "10", "b": false, "v": 5}',
                    '{"k": 2, "s": "A", "b": true, "v": 3}',
                ],
            ],
        },
        "sinks": ["m7", "j11"],
        "store": "sqlite",
        "tables": [],
        "compare_tables": ["t6", "t13"],
        "max_files": None,
        "ordered": {"m7": []},
        "mtimes": "equal",
        "partitions": 1,
    }
)


def test_windows_of_one_key_upsert_in_window_order(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
