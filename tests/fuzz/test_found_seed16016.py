"""Found by the differential fuzzer (tests/fuzz): seed 16016 (a 53-minute soak), minimized by hand.

A table keyed by `k`, filled by a SELECT that does not keep the stream's event time: two events of
one key arrive out of event-time order (within the watermark). The reference upserts them in event
time (the later event's row stays); Spark sorted each table batch by event time and arrival, and
with no event-time column left in the rows only by arrival, so the earlier event's row stayed.
Fixed in deployer/spark/datastores/materialize.py: such rows are written in the Sequencer's order.
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
        "CREATE STREAMSCHEMA s1 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts "
        "WATERMARK 1 MINUTE;\n"
        "CREATE TABLE t1 (k integer, v integer, PRIMARY KEY (k)) IN db;\n"
        "INSERT INTO TABLE t1 SELECT k, v FROM s1;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 2, "v": 50, "ts": "2026-01-01T00:00:15Z"}',
                    '{"k": 2, "v": 100, "ts": "2026-01-01T00:00:05Z"}',
                ]
            ]
        },
        "sinks": [],
        "store": "sqlite",
        "tables": [],
        "compare_tables": ["t1"],
        "max_files": None,
        "ordered": {},
        "mtimes": "reversed",
        "partitions": 1,
    }
)


def test_engines_agree_d009c808ff(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
