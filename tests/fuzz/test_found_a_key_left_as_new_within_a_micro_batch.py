"""Found by the differential fuzzer (tests/fuzz): seed 7905, cut down to the statement that differed.

`SEQUENCE EVERY e1=s1[c]<0:2>, (e2=s1 OR e3=s1)`: its first element may take no event, so every
event completes a match as e2 (e1 empty) and leaves the key's automaton as new. The reference
executor forgets such a key after each event, and the next event finds a new state; Spark forgot it
only when it saved the key at the end of a micro-batch, so within one its later events met the old
state and made no such match (7 rows on the reference, 2 on Spark). Spark's pattern processor now
starts the key anew after each event that leaves it as new, as the reference does
(deployer/spark/patterns/processor.py).
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
        "INSERT INTO m8 SELECT e1[0].k AS p1, e1[0].v AS p2, e1[last].v AS p3, e1[0].ts AS p4, "
        "e2.ts AS p5, e3.v AS p6, match_time() AS t7 FROM SEQUENCE EVERY e1=s1[('é' LIKE "
        "'_')]<0:2>, (e2=s1 OR e3=s1);\n",
        "inputs": {
            "s1": [
                [
                    '{"k": null, "v": 1, "ts": "2026-01-01T00:00:00Z"}',
                    '{"k": -2147483648, "v": 0, "ts": "2026-01-01T00:00:10Z"}',
                    '{"k": null, "v": 0, "ts": "2026-01-01T00:00:15Z"}',
                    '{"k": 1, "v": 2, "ts": "2026-01-01T00:00:45Z"}',
                    '{"k": null, "v": 4, "ts": "2026-01-01T00:00:00Z"}',
                    '{"k": 10, "v": 3, "ts": "2026-01-01T00:00:01Z"}',
                    '{"k": 7, "v": 7, "ts": "2026-01-01T00:00:01.25Z"}',
                    '{"k": 2, "v": 4, "ts": "2026-01-01T00:00:01.75Z"}',
                    '{"k": -1, "v": -1, "ts": "2026-01-01T00:00:01.25Z"}',
                    '{"k": 0, "v": null, "ts": "2025-12-31T23:59:51.25Z"}',
                    '{"k": 2147483647, "v": 2, "ts": "2025-12-31T23:59:51.5Z"}',
                    '{"k": 2147483647, "v": 7, "ts": "2025-12-31T23:59:48.5Z"}',
                    '{"k": 1, "v": 5, "ts": "2026-01-01T00:59:48.5Z"}',
                    '{"k": 7, "v": 1, "ts": "2026-01-01T00:59:47.5Z"}',
                    '{"k": 1, "v": 1, "ts": "2026-01-01T00:59:37.5Z"}',
                ],
                [
                    '{"k": -2147483648, "v": 0, "ts": "2026-01-01T00:59:39Z"}',
                    '{"k": 3, "v": -1, "ts": "2026-01-01T00:59:29Z"}',
                    '{"k": 3, "v": 2, "ts": "2026-01-01T00:59:39Z"}',
                    '{"k": 0, "v": 3, "ts": "2026-01-01T00:59:38Z"}',
                ],
                [
                    '{"k": 1, "v": 3, "ts": "2026-01-01T00:59:39.5Z"}',
                    '{"k": 4, "v": null, "ts": "2026-01-02T00:59:39.5Z"}',
                    '{"k": 0, "v": -1, "ts": "2026-01-02T00:59:39Z"}',
                    '{"k": 0, "v": -1, "ts": "2026-01-03T00:59:39Z"}',
                    '{"k": 2, "v": 0, "ts": "2026-01-03T00:59:38Z"}',
                    "{not json",
                    '{"k": null, "v": "abc", "ts": "2026-01-03T00:59:43.25Z"}',
                ],
            ]
        },
        "sinks": ["m8"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 2,
        "ordered": {"m8": []},
        "mtimes": "reversed",
        "partitions": 2,
        "trigger_clock": None,
    }
)


def test_a_key_left_as_new_starts_anew_at_its_next_event(spark: Any, tmp_path: Any) -> None:
    result = check_case(CASE, spark, None, tmp_path)
    assert len(result.streams["m8"]) == 7  # a match at each event that is not late, e1 empty
