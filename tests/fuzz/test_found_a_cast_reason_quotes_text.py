"""Found by the differential fuzzer (tests/fuzz): seed 10022.

A failed CAST of a string holding a quote: the reference quoted the value as Python's repr, Spark in
plain single quotes. Both now quote it as a CPL literal (`'x''y'`).

dead letters: 2 on the reference, 2 on Spark
    only on the reference:
      ('Map', 'cannot cast "x\\'y" to double', None, 'n3', 2, None, None, (None, 0, 1, '2026-01-01T00:00:00Z'))
      ('Map', 'cannot cast "x\\'y" to double', None, 'n3', 2, None, None, (None, None, 1, '2026-01-01T00:00:01Z'))
    only on Spark:
      ('Map', "cannot cast 'x'y' to double", None, 'n3', 2, None, None, (None, 0, 1, '2026-01-01T00:00:00Z'))
      ('Map', "cannot cast 'x'y' to double", None, 'n3', 2, None, None, (None, None, 1, '2026-01-01T00:00:01Z'))
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, v integer, n bigint, ts timestamp TIMESTAMP BY "
        "ts;\n"
        "INSERT INTO m1 SELECT *, CASE WHEN (nullif(0.0, -2.25) = CAST('x''y' AS double)) THEN "
        "v ELSE v END AS c2 FROM s1 WHERE (CASE WHEN TRUE THEN 1 END NOT IN (0));\n"
        "INSERT INTO m3 SELECT * FROM m1;\n"
        "INSERT INTO m4 SELECT k, ts, 0 AS c5, v AS c6, "
        "coalesce(from_epoch_millis(1767225600000), ts) AS c7 FROM s1;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": null, "v": 0, "n": 1, "ts": "2026-01-01T00:00:00Z"}',
                    '{"k": null, "v": null, "n": 1, "ts": "2026-01-01T00:00:01Z"}',
                ]
            ]
        },
        "sinks": ["m3", "m4"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 2,
        "ordered": {"m1": [], "m3": [], "m4": []},
        "mtimes": "increasing",
        "partitions": 1,
    }
)


def test_engines_agree_ce9c6f1013(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
