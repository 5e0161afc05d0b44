"""Found by the differential fuzzer (tests/fuzz): seed 1204, cut down to the statement that differed.

`OUTPUT SNAPSHOT EVERY 1 SECOND` over a sliding TIME window (1.5 s, advancing by 0.5 s) with GROUP BY:
at the tick of 00:01:20 the window [00:01:18.5, 00:01:20) held k = 0 (its event at 18.5) and
k = -2147483648 (at 19.5, with 100 and 2147483647): the reference sent k = 0 first, Spark
k = -2147483648. The snapshot kept its groups in the order they first appeared, and forgot them at
a tick with no live group and no row pending: the reference, whose watermark moves event by event,
met such a tick at 00:01:17 and forgot k = -2147483648 (seen since 00:00:20.5); Spark's one
micro-batch had already brought the later windows' rows, pending at that tick, so it remembered.
Over a TIME window the live rows are now those of one window in the order its rows came, by their
first event in the window (Siddhi shows a group where its oldest event still in the window is), on
both engines whatever the micro-batches cut; a group whose row is older is dropped
(deployer/output/snapshot.py). Without the fix this case fails on Spark's order, one partition or two.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, v integer, b boolean, n bigint, ts timestamp "
        "TIMESTAMP BY ts;\n"
        "INSERT INTO a10 SELECT k, count(*) AS a7, window_start() AS ws8, window_end() AS we9 "
        "FROM s1 WINDOW TIME SIZE 1500 MILLISECOND ADVANCE 500 MILLISECOND GROUP BY k OUTPUT "
        "SNAPSHOT EVERY 1 SECOND;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 3, "v": 0, "b": true, "n": 1, "ts": "2026-01-01T00:00:10Z"}',
                    '{"k": null, "v": 3, "b": true, "n": 1000, "ts": "2026-01-01T00:00:20Z"}',
                    '{"k": -2147483648, "v": 2, "b": true, "n": 9223372036854775807, "ts": '
                    '"2026-01-01T00:00:21.5Z"}',
                    '{"k": 5, "v": 5, "b": true, "n": 9223372036854775807, "ts": "2026-01-01T00:00:31.5Z"}',
                    '{"k": -2147483648, "v": 2, "b": false, "n": 2, "ts": "2026-01-01T00:00:41.5Z"}',
                    '{"k": null, "v": 0, "b": true, "n": null, "ts": "2026-01-01T00:00:46.5Z"}',
                    '{"k": -1, "v": 3, "b": false, "n": -3, "ts": "2026-01-01T00:00:56.5Z"}',
                    '{"k": 10, "v": 5, "b": false, "n": -3, "ts": "2026-01-01T00:01:01.5Z"}',
                    '{"k": 1, "v": 4, "b": false, "n": 2, "ts": "2026-01-01T00:01:06.5Z"}',
                    '{"k": 3, "v": 4, "b": true, "n": 1099511627776, "ts": "2026-01-01T00:01:08.5Z"}',
                    '{"k": 3, "v": 5, "b": false, "n": 1099511627776, "ts": "2026-01-01T00:01:08.5Z"}',
                    '{"v": 1, "b": false, "n": null, "ts": "2026-01-01T00:01:13.5Z"}',
                    '{"k": 0, "v": 1, "b": true, "n": -9223372036854775808, "ts": "2026-01-01T00:01:18.5Z"}',
                    '{"k": null, "v": null, "b": false, "n": null, "ts": "2026-01-01T00:01:17.5Z"}',
                    '{"k": -2147483648, "v": 3, "b": false, "n": 1099511627776, "ts": '
                    '"2026-01-01T00:01:19.5Z"}',
                    '{"k": 100, "v": 2, "b": false, "n": 0, "ts": "2026-01-01T00:01:19.5Z"}',
                    '{"k": 2147483647, "v": 2, "b": true, "n": 0, "ts": "2026-01-01T00:01:19.5Z"}',
                    '{"k": 1, "v": 3, "b": null, "n": 1099511627776, "ts": "2026-01-01T00:00:34.5Z"}',
                    '{"k": -1, "v": 2, "b": false, "n": 9223372036854775807, "ts": "2026-01-01T00:00:34.5Z"}',
                    '{"k": -1, "v": 4, "b": false, "n": -3, "ts": "2026-01-01T00:00:34.75Z"}',
                    '{"k": 0, "v": 3, "b": false, "n": 1000, "ts": "2026-01-01T00:00:36.25Z"}',
                    '{"k": 1, "v": 1, "b": true, "n": 9223372036854775807, "ts": "2026-01-01T00:00:56.25Z"}',
                    '{"k": 7, "v": 3, "b": false, "n": -3, "ts": "2026-01-01T00:01:01.25Z"}',
                    '{"k": 4, "v": 5, "b": false, "n": 1099511627776, "ts": "2026-01-01T00:01:01.25Z"}',
                    '{"k": 3, "v": 4, "b": false, "n": 9223372036854775807, "ts": "2026-01-02T00:01:01.25Z"}',
                    '{"k": 7, "v": 0, "b": true, "n": 0, "ts": "2026-01-02T00:01:03.25Z"}',
                    '{"k": 100, "v": 2, "b": false, "n": 0, "ts": "2026-01-02T00:01:33.25Z"}',
                    '{"k": 4, "v": 2, "b": true, "n": 0, "ts": "2026-01-02T00:01:43.25Z"}',
                    '{"k": 7, "v": 4, "b": false, "n": 0, "ts": "2026-01-02T00:01:44.75Z"}',
                    '{"k": null, "v": 1, "b": true, "n": 1000, "ts": "2026-01-02T00:01:54.75Z"}',
                ]
            ],
        },
        "sinks": ["a10"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"a10": []},
        "mtimes": "equal",
        "partitions": 1,
        "trigger_clock": None,
    }
)


@pytest.mark.parametrize("partitions", [1, 2])
def test_a_snapshot_shows_a_windows_groups_in_one_order(spark: Any, tmp_path: Any, partitions: int) -> None:
    check_case(replace(CASE, partitions=partitions), spark, None, tmp_path)
