"""Found by the differential fuzzer (tests/fuzz): seed 4249 (docs/fuzzing.md).

A TUPLE window grouped by a constant (`GROUP BY NULL`), read by two sinks, each in a query of its
own: the queries share the translated plan, and Spark's optimizer folded the window's group text,
`to_json(struct(NULL))`, in both queries' threads at once, through the one JSON generator that
expression keeps; one query failed (`JsonGenerationException: Can not start an object, expecting
field name`). Fixed: the session leaves ConstantFolding out (deployer/spark/run/session.py). With
the rule in, this case failed six runs of six here; the fuzzer's own replay once passed.
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
        "CREATE WINDOW w3 AS TUPLE SIZE 2 ADVANCE 1;\n"
        "INSERT INTO a4 SELECT NULL AS g1, count(*) AS a2 FROM s1 WINDOW w3 GROUP BY NULL "
        "HAVING count(*) > 0;\n"
        "INSERT INTO f5 SELECT * FROM a4 WHERE ((a2 * 9223372036854775807) > 1);\n"
        "INSERT INTO f6 SELECT * FROM a4 WHERE ((a2 * 9223372036854775807) > 1);\n",
        "inputs": {"s1": [["{not json"]]},
        "sinks": ["f5", "f6"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"a4": ["g1"], "f5": ["g1"], "f6": ["g1"]},
        "mtimes": "increasing",
        "partitions": 1,
        "trigger_clock": None,
    }
)


def test_a_constant_key_folded_by_two_queries(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
