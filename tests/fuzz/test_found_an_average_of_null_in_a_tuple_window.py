"""Found by the differential fuzzer (tests/fuzz): seed 38208, minimized by hand.

`avg(coalesce(NULL, NULL))` in a TUPLE window: the argument has no type but NULL's, which the Spark
layout that packs a bucket's numbers (deployer/spark/windows/tuple_buckets.py) took for a number and filled
with 0 into a text column: the query failed (ArrowTypeError). Such a window now keeps its state per
group (deployer/spark/windows/state_layout.py `bucketed`), as windows over text do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = Case(
    script="CREATE STREAMSCHEMA s1 WITH k integer, v integer;\n"
    "INSERT INTO a11 SELECT sum(k) AS a7, avg(coalesce(NULL, NULL)) AS a8, sum(NULL) AS a9 "
    "FROM s1 WINDOW TUPLE SIZE 2 ADVANCE 1;\n",
    inputs={"s1": [[json.dumps({"k": k, "v": None}) for k in (None, 1, 2)]]},
    sinks=["a11"],
    ordered={"a11": []},
)


def test_engines_agree(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
