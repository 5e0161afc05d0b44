"""Found by the differential fuzzer (tests/fuzz): seed 1412, cut down to the statement that differed.

`SEQUENCE (e1=s1 AND e2=j5) PARTITION BY k`, j5 a self-join of s1 over TIME windows (2 s sliding, 1
minute): a pattern over a join's rows takes its events once the watermark has passed them, and at
the end of a bounded input not those the final watermark has not passed (docs/language.md, "Rows
out of time order"). The join's output ends a window's size (a minute) behind s1, at
2026-01-01T23:59:10.5, so k = 7's match, at the input's last instant (2026-01-02T00:00:00), must not
be made: Spark did not make it, the reference did. Its merge let events through up to the watermark
of the inputs still running (s1, ended later than the join on the reference's way of ending them),
forgetting the join's final watermark below it; an input that ended now holds the others at its
final watermark there, as Spark's watermark, the least of its streams', does
(deployer/local/runtime.py `Merger.limit`). k = 2's match, a day earlier, both make.
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
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, n bigint, x double, v integer, d decimal(8, 2), "
        "ts timestamp TIMESTAMP BY ts;\n"
        "CREATE WINDOW w3 AS TIME SIZE 2 SECOND ADVANCE 1 SECOND;\n"
        "CREATE WINDOW w4 AS TIME SIZE 1 MINUTE;\n"
        "INSERT INTO j5 SELECT l.k AS k, l.ts AS ts, l.n AS l_n, l.x AS l_x, r.n AS r_n, r.x AS "
        "r_x, r.ts AS r_ts, 0 AS c1, sqrt(l.k) AS c2 FROM s1 AS l WINDOW w3, s1 AS r WINDOW w4 "
        "WHERE TRUE;\n"
        "INSERT INTO m11 SELECT e1.k AS k, e2.ts AS p6, e2.r_n AS p7, e2.r_ts AS p8, e2.c2 AS "
        "p9, match_time() AS t10 FROM SEQUENCE (e1=s1 AND e2=j5) PARTITION BY k WHERE ((7 / "
        "e1.n) <= 1);\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 2, "n": -9223372036854775808, "x": -2.25, "v": 10, "d": 0.01, "ts": '
                    '"2026-01-01T00:00:00Z"}'
                ],
                ['{"k": 1, "n": 1, "x": 2.5, "v": 0, "d": 999999.00, "ts": "2026-01-02T00:00:00Z"}'],
                ['{"k": 7, "n": -3, "x": 2.5, "v": 5, "d": -999999.00, "ts": "2026-01-02T00:00:00Z"}'],
                ['{"k": null, "n": null, "x": -2.25, "v": 100, "d": null, "ts": "2026-01-01T23:59:59Z"}'],
                [
                    '{"k": -2147483648, "n": 1000, "x": 100.125, "v": 7, "d": 999999.00, "ts": '
                    '"2026-01-02T00:00:09Z"}'
                ],
                [
                    '{"k": null, "n": -9223372036854775808, "x": null, "v": 2, "d": 2.50, "ts": '
                    '"2026-01-02T00:00:10.5Z"}'
                ],
            ]
        },
        "sinks": ["m11"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"m11": ["k"]},
        "mtimes": "equal",
        "partitions": 1,
        "trigger_clock": None,
    }
)


@pytest.mark.parametrize("partitions", [1, 2])
def test_a_pattern_over_a_join_takes_nothing_past_the_joins_final_watermark(
    spark: Any, tmp_path: Any, partitions: int
) -> None:
    ref = check_case(replace(CASE, partitions=partitions), spark, None, tmp_path)
    assert [r["k"] for r in ref.streams["m11"]] == [2]  # k = 7's events are past the join's final watermark
