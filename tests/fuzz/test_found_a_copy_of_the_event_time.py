"""Found by the differential fuzzer (tests/fuzz): seed 11004.

A Map that copies the event time under another name (`ts AS c2`), joined: both copies kept the
watermark's mark on Spark, and the join failed (MULTIPLE_EVENT_TIME_COLUMNS). Only the output's
event-time field carries it now (deployer.spark.translate.graph.project).

a run failed: reference ran; Spark QueryFailed: query cep:sink:j4 failed: [MULTIPLE_EVENT_TIME_COLUMNS] More than one event time columns are available. Please ensure there is at most one event time column per stream. event time columns: (_r1#120712-T0ms,_r2#120713-T0ms) SQLSTATE: 42K09; its unfinished batch is kept in the checkpoint: run the same command again to resume
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, v integer, n bigint, x double, ts timestamp "
        "TIMESTAMP BY ts;\n"
        "INSERT INTO m1 SELECT k, ts, ts AS c2 FROM s1 WHERE (CAST('1.25' AS decimal(6, 2)) = "
        "NULL);\n"
        "INSERT INTO m3 SELECT k, ts FROM m1;\n"
        "INSERT INTO j4 SELECT l.k AS k, l.ts AS ts, r.c2 AS r_c2, r.ts AS r_ts FROM s1 AS l "
        "WINDOW TIME SIZE 10 SECONDS, m1 AS r WINDOW TIME SIZE 10 SECONDS WHERE l.k = r.k AND "
        "TRUE;\n",
        "inputs": {"s1": [[]]},
        "sinks": ["m3", "j4"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"m1": [], "m3": []},
        "mtimes": "increasing",
        "partitions": 1,
    }
)


def test_engines_agree_f834b369a4(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
