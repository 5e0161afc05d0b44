"""Found by the differential fuzzer (tests/fuzz): seed 7807, cut down to the statement that differed.

A SEQUENCE with PARTITION BY whose matches two partitions (k = 4 and k = -1) complete at one time,
each by a deadline (its optional `e3<0:2>` ends when the watermark passes), behind `OUTPUT LAST EVERY
2 EVENTS`, which after a pattern with PARTITION BY takes rows in time and order key once the
watermark has passed them (deployer/output/limiter.py `InTimeOrder`). The two matches' order keys
were equal (the match time, then the partial's age within its own key), so the tie went by arrival:
the reference executor lets its keys' deadlines pass in the order it first met them, Spark in
whatever order its keys' timers fire, and LAST kept k = -1's row on one engine, k = 4's on the other.
A deadline's order key now has the partition key's text before the partial's age
(deployer/patterns/runner.py `key_text`): one order on both engines.
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO m12 SELECT e2.k AS p4, e2.v AS p5, match_time() AS t9 FROM SEQUENCE EVERY "
        "((e1=s1[(NOT (TRUE))] OR e2=s1), e3=s1[k = e1.k]<0:2>) PARTITION BY k "
        "OUTPUT LAST EVERY 2 EVENTS;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 4, "v": 2147483647, "ts": "2026-01-01T00:00:05Z"}',
                    '{"k": -1, "v": -2147483648, "ts": "2026-01-01T00:00:05Z"}',
                    '{"k": null, "v": -1, "ts": "2026-01-01T00:01:05Z"}',
                ],
                [],
                [
                    '{"k": null, "v": 4, "ts": "2026-01-01T00:01:15Z"}',
                    '{"k": null, "v": null, "ts": "2026-01-01T00:01:17Z"}',
                ],
                [],
            ]
        },
        "sinks": ["m12"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 2,
        "ordered": {"m12": []},
        "mtimes": "reversed",
        "partitions": 2,
        "trigger_clock": None,
    }
)


def test_deadlines_of_two_partitions_at_one_time(spark: Any, tmp_path: Any) -> None:
    result = check_case(CASE, spark, None, tmp_path)
    # the two matches at 00:00:05 make one bucket: its latest row, k = 4's (its key's text sorts after
    # "-1"), on both engines
    assert [r["p4"] for r in result.streams["m12"]] == [4]
