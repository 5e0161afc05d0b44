"""Found by the differential fuzzer (tests/fuzz): seed 38107, minimized by hand.

`(v * 2147483647) * 1000000000` with v = 0 is 0 in the language (evaluated left to right, each
product checked for overflow). Spark's optimizer reassociated the chain into `v * (2147483647 *
1000000000)`, whose constant overflows an integer, and every event was dead-lettered with
`integer overflow: 0 is out of range for integer`. The rule is excluded from the session
(ReorderAssociativeOperator, deployer/spark/run/session.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = Case(
    script="CREATE STREAMSCHEMA s WITH k integer, v integer;\n"
    "INSERT INTO m SELECT k, from_epoch_millis((v * 2147483647) * 1000000000) AS c6 FROM s;\n"
    "INSERT INTO m2 SELECT k, ((v * 2147483647) * 1000000000) AS c6, (v + 2147483647) + (-10) AS c7 FROM s;\n",
    inputs={"s": [[json.dumps({"k": k, "v": v}) for k, v in ((1, 0), (2, 1), (3, -1), (4, 2))]]},
    sinks=["m", "m2"],
    ordered={"m": [], "m2": []},
)


def test_engines_agree(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
