"""Found by the differential fuzzer (tests/fuzz): seed 7302. A BATCH window whose input can fail
(`from_epoch_millis(k * 9223372036854775807 ...)` overflows) and whose START can fail on an event
(`CAST(s AS integer)`), read by two sinks: the window's input failures are the dead-letters query's
(two queries compute the window), which translated the window for them and wrote every failure
point of its node, so the event START refused (`{"k": null, "s": "a"}`) was also written there,
besides by the window's own failure query (`failed:n3`): once on the reference, twice on Spark.

dead letters: 6 on the reference, 7 on Spark
    only on Spark:
      ('Aggregate', "cannot cast 'a' to integer", None, 'n3', 5, None, None, (None, 'a'))
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
        "CREATE STREAMSCHEMA s1 WITH k integer, s varchar;\n"
        "CREATE STREAMSCHEMA s2 WITH k integer, v integer;\n"
        "CREATE WINDOW w4 AS BATCH START (CAST(s AS integer) > 1) STOP (CAST((k * "
        "9223372036854775807) AS double) > 1);\n"
        "INSERT INTO a5 SELECT k, count(from_epoch_millis((k * 9223372036854775807) * 1000)) AS "
        "a1, (count(from_epoch_millis((k * 9223372036854775807) * 1000)) * 2147483647) AS a2, "
        "min(CAST('1.25' AS decimal(6, 2))) AS a3 FROM s1 WINDOW w4 GROUP BY k HAVING TRUE "
        "OUTPUT LAST EVERY 1 EVENTS;\n"
        "INSERT INTO m7 SELECT *, (CAST('100' AS decimal(5, 0)) * k) AS c6 FROM a5 WHERE TRUE;\n"
        "INSERT INTO m9 SELECT k, CAST((k * 9223372036854775807) AS decimal(10, 2)) AS c8 FROM "
        "a5 WHERE (CAST((k + 9223372036854775807) AS double) > 1) OUTPUT FIRST EVERY 1 "
        "EVENTS;\n",
        "inputs": {
            "s1": [['{"s": "a"}', "{not json", '{"k": 3, "s": "ab"}', "{not json", '{"k": null, "s": "a"}']],
            "s2": [["{not json", '{"k": null, "v": null}']],
        },
        "sinks": ["m7", "m9"],
        "store": "sqlite",
        "tables": [],
        "compare_tables": [],
        "max_files": 2,
        "ordered": {"a5": [], "m7": [], "m9": []},
        "mtimes": "increasing",
        "partitions": 1,
        "trigger_clock": None,
    }
)


def test_a_window_failure_point_is_written_once(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
