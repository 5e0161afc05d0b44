"""Found by the differential fuzzer (tests/fuzz): seed 711. A Map adds a constant (`TRUE AS c7`, a non-
nullable field) to events that a later Map fails on (a product that overflows), in the stateless
sinks' shared query, which splits the failures on the driver: the failed event's struct, NULL for
the rows that did not fail, held that non-nullable field, and Arrow refused the batch (`Can't view
array ... nulls in input cannot be viewed as non-nullable`).

a run failed: reference ran; Spark QueryFailed: query cep:sinks:stateless failed: An exception was
raised by the Python Proxy. Return Message: Traceback (most recent call last):; its unfinished batch
is kept in the checkpoint: run the same command again to resume
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE TRIGGER tr1 AT EVERY 1 SECOND;\n"
        "CREATE STREAMSCHEMA s1 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
        "CREATE STREAMSCHEMA s2 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts "
        "WATERMARK 5 SECONDS;\n"
        "INSERT INTO a6 SELECT k, count(*) AS a2, NULL AS a3, window_start() AS ws4, "
        "window_end() AS we5 FROM s2 WINDOW TIME SIZE 1500 MILLISECOND ADVANCE 500 MILLISECOND "
        "GROUP BY k HAVING count(*) > 0;\n"
        "INSERT INTO m8 SELECT *, TRUE AS c7 FROM s2;\n"
        "INSERT INTO m10 SELECT *, (k * 9223372036854775807) AS c9 FROM m8;\n",
        "inputs": {"s1": [["{not json"]], "s2": [["{not json"]]},
        "sinks": ["tr1", "a6", "m10"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"tr1": [], "a6": ["k"], "m8": [], "m10": []},
        "mtimes": "increasing",
        "partitions": 1,
        "trigger_clock": "2026-01-01T00:00:00Z/2026-01-01T00:00:10Z",
    }
)


def test_engines_agree_2ab6a2f337(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
