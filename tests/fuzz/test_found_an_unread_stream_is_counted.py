"""Found by the differential fuzzer (tests/fuzz): seed 41101. A stream no statement reads still has
its records counted as events in on Spark (the dead-letters query counts a stream without event
time), as the reference counts them (docs/guarantees.md: events in = out + dead-lettered + filtered
+ late).

counters: reference {'events_in': 1, 'events_out': 0, 'dead_lettered': 0, 'late': 0, 'applied': 0, 'filtered': 0}, Spark {'events_in': 0, 'events_out': 0, 'dead_lettered': 0, 'late': 0, 'applied': 0, 'filtered': 0}
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
        "CREATE STREAMSCHEMA s2 WITH k integer, v integer;\n"
        "INSERT INTO f1 SELECT * FROM s2 WHERE ((k * 9223372036854775807) > 1);\n",
        "inputs": {"s1": [['{"k": null, "v": null}']], "s2": []},
        "sinks": ["f1"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"f1": []},
        "mtimes": "increasing",
        "partitions": 1,
    }
)


def test_records_of_a_stream_no_statement_reads_are_counted(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)


def test_records_of_an_unread_stream_with_event_time_are_counted(spark: Any, tmp_path: Any) -> None:
    timed = case_from_dict(
        {
            **CASE.__dict__,
            "script": "CREATE STREAMSCHEMA s1 WITH k integer, ts timestamp TIMESTAMP BY ts;\n"
            "CREATE STREAMSCHEMA s2 WITH k integer, v integer;\n"
            "INSERT INTO f1 SELECT * FROM s2 WHERE k > 1;\n",
            "inputs": {
                "s1": [['{"k": 1, "ts": "2026-01-01T00:00:00Z"}', "{not json", '{"k": 2}']],
                "s2": [['{"k": 2, "v": 1}', '{"k": "abc"}']],
            },
            "tables": [],
        }
    )
    check_case(timed, spark, None, tmp_path)
