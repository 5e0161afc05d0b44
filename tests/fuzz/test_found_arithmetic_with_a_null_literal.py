"""Found by the differential fuzzer (tests/fuzz): seed 38013 (the widened generator's first soak),
minimized by hand.

`NULL - CAST('0.001' AS decimal(6, 3))` in a WHERE after a window: the query plan counted a failure
point for it (operators.analysis took the NULL for a decimal(38, 0), whose difference may overflow)
where the Spark translation, rightly, compiled it to NULL and found none; the deployment's check of
the two stopped the run. An arithmetic operation with a NULL operand is NULL and never fails, on
either engine: both now say so (operators.analysis._fails_itself, deployer.spark.translate.expr).
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
    "INSERT INTO g SELECT k, count(*) AS n FROM s1 WINDOW TUPLE SIZE 1 GROUP BY k;\n"
    "INSERT INTO f SELECT * FROM g WHERE (0.5 = (NULL - CAST('0.001' AS decimal(6, 3))));\n"
    "INSERT INTO h SELECT * FROM g WHERE n > 1;\n"
    "INSERT INTO i SELECT k, (n / NULL) AS a, (NULL % n) AS b, (n * NULL) AS c FROM g;\n",
    inputs={"s1": [[json.dumps({"k": k, "v": k}) for k in (0, 1, 1, 2)]]},
    sinks=["f", "h", "i", "g"],
    ordered={"g": ["k"]},
    partitions=1,
)


def test_engines_agree(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
