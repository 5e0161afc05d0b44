"""Found by the differential fuzzer (tests/fuzz): seed 6000 (30-minute soak).

A stream that meets itself in a merge (`FROM m1, s1` where m1 is a WHERE over s1): the merge puts
the copies from its first input before those from its second at the same event time. Two events at
00:00:20 came in different micro-batches (one file each): Spark's Sequencer released the first as
soon as the watermark reached it, so its two copies went out before the second event's first copy
(None, None, -1, -1); the reference waits until the watermark passes 00:00:20 and merges all four
(None, -1, None, -1). Such a stream is now released strictly below its watermark, as streams that
meet other streams are (operators.analysis.self_merged_sources, deployer/spark/streams/sequencer.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, b boolean, ts timestamp TIMESTAMP BY ts;\n"
        "CREATE STREAMSCHEMA s2 WITH k integer, v integer, n bigint, x double, ts timestamp "
        "TIMESTAMP BY ts;\n"
        "INSERT INTO m1 SELECT k, b, ts FROM s1 WHERE b;\n"
        "INSERT INTO u2 SELECT * FROM m1, s1;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": -1, "b": false, "ts": "2026-01-01T00:00:10Z"}',
                    '{"k": null, "b": true, "ts": "2026-01-01T00:00:20Z"}',
                ],
                [
                    '{"k": 0, "b": false, "ts": "2026-01-01T00:00:10Z"}',
                    '{"k": 1, "b": true, "ts": "2026-01-01T00:00:00Z"}',
                    '{"k": -1, "b": true, "ts": "2026-01-01T00:00:20Z"}',
                    '{"k": 4, "b": true, "ts": "2026-01-01T00:00:17Z"}',
                    '{"k": 5, "b": null, "ts": "2026-01-01T00:00:37Z"}',
                    '{"k": 4, "b": false, "ts": "2026-01-01T00:00:47Z"}',
                    '{"k": null, "b": true, "ts": "2026-01-01T00:00:52Z"}',
                    '{"k": null, "b": false, "ts": "2026-01-01T00:01:02Z"}',
                ],
            ],
            "s2": [
                [],
                [],
                ['{"k": null, "v": 4, "n": 1, "x": 1000000000000000.0, "ts": "2026-01-01T00:00:05Z"}'],
                [],
            ],
        },
        "sinks": ["u2"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 1,
        "ordered": {"m1": [], "u2": []},
        "mtimes": "equal",
        "partitions": 1,
    }
)


def test_a_stream_merged_with_itself_keeps_the_merge_order(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
