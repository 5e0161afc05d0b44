"""Found by the differential fuzzer (tests/fuzz): seed 3001, shrunk by hand.

coalesce(a, b) evaluates b only when a is NULL (it is CASE WHEN a IS NOT NULL THEN a ELSE b END):
the reference did so, Spark dead-lettered the event when b failed although a was not NULL
(`coalesce(mod(k, 10), mod(k, k))` with k = 0: division by zero). Fixed in deployer/spark/translate/expr.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, v integer;\n"
        "INSERT INTO m1 SELECT k, coalesce(mod(k, 10), mod(k, k)) AS c, coalesce(v, 1 / k) AS d "
        "FROM s1;\n",
        "inputs": {
            "s1": [['{"k": 0, "v": 3}', '{"k": 5, "v": null}', '{"k": 0, "v": null}', '{"k": null, "v": 1}']]
        },
        "sinks": ["m1"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"m1": []},
        "mtimes": "increasing",
        "partitions": 2,
    }
)


def test_engines_agree_6c27e213da(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
