"""Found by the differential fuzzer (tests/fuzz): seed 7702, cut down to the statement that differed.

A pattern with PARTITION BY whose absence fires every 250 ms, behind `OUTPUT EVERY 1 SECONDS` (ALL).
One micro-batch brought every event: partition k = 1, whose own events run to 00:05:42.5, made its
matches up to there at once, while the other partitions' absences waited for the watermark, and
their timers fired in the next micro-batch. The limiter on Spark held its rows in arrival order and
let a bucket's rows out from the front only, so the rows that came behind later ones were never let
out (15,104 of 58,602 rows in the case as drawn), and without the limit the rows were the same but in
another order across partitions (which docs/language.md allows: rows are in order per partition
key). The limiter now lets out every row of a closed bucket, by time and then the pattern's order
key (deployer/output/limiter.py `AllEvery`), which is the reference executor's order.

The same case with `OUTPUT LAST EVERY 1 SECONDS` then let out as many rows on both engines, but
other ones on Spark: LAST kept each bucket's row that came last, not the latest; it now keeps the
latest by time and order key (`LastEvery`). With `OUTPUT EVERY 5 EVENTS`, `OUTPUT FIRST EVERY 4 EVENTS`
(or `LAST EVERY 7 EVENTS`) the rows differed too: a limit by count decides as a row comes, so the
order rows come in decides what goes out. Such a limit after a pattern with PARTITION BY now takes
rows once the watermark has passed them, in time and order key (`InTimeOrder`), on both engines.

The events the fuzzer drew an hour after the others are here 55 minutes earlier (fewer absences,
a shorter run): each defect still shows without its fix (ALL: 5802 rows on the reference, 3898 on
Spark; LAST, by count: the same number of rows, other ones).
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
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, x double, b boolean, d decimal(8, 2), ts "
        "timestamp TIMESTAMP BY ts WATERMARK 5 SECONDS;\n"
        "INSERT INTO m9 SELECT e1.x AS p5, match_time() AS t6, CAST(least(e1.k, e1.k) AS "
        "bigint) AS c7, ((e1.d + e1.d) % (e1.d * e1.d)) AS c8 FROM PATTERN EVERY (NOT "
        "s1[(ceil(d) >= CAST('100' AS decimal(5, 0)))] FOR 250 MILLISECONDS OR e1=s1[b]) WITHIN "
        "5 SECONDS PARTITION BY k OUTPUT EVERY 1 SECONDS;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": 1, "x": 100.125, "b": true, "d": null, "ts": "2026-01-01T00:00:05Z"}',
                    '{"k": 2147483647, "x": null, "b": null, "d": -1.50, "ts": "2026-01-01T00:00:05.5Z"}',
                    '{"k": null, "x": 100.125, "b": false, "d": 0.01, "ts": "2026-01-01T00:00:15.5Z"}',
                    '{"k": -2147483648, "x": 100.125, "b": null, "d": -999999.00, "ts": '
                    '"2026-01-01T00:00:20.5Z"}',
                    '{"k": 100, "x": 3.0, "b": true, "d": -1.50, "ts": "2026-01-01T00:00:20.75Z"}',
                    '{"k": 0, "x": 1000000000000000.0, "b": true, "d": -1.50, "ts": '
                    '"2026-01-01T00:00:10.75Z"}',
                    '{"k": -2147483648, "x": -2.25, "b": false, "d": 999999.00, "ts": '
                    '"2026-01-01T00:00:20.75Z"}',
                    '{"k": null, "x": 1.5, "b": false, "d": 1.00, "ts": "2025-12-31T23:59:35.75Z"}',
                    '{"k": 5, "x": 2.5, "b": false, "d": 0.01, "ts": "2025-12-31T23:59:35.25Z"}',
                    '{"k": 1, "x": -2.25, "b": null, "d": -999999.00, "ts": "2025-12-31T23:59:35.5Z"}',
                    '{"k": 7, "x": 2.5, "b": true, "d": 0.01, "ts": "2025-12-31T23:59:40.5Z"}',
                    '{"k": 7, "x": 3.0, "b": true, "d": null, "ts": "2025-12-31T23:59:40Z"}',
                    '{"k": 7, "x": 2.5, "b": true, "d": 0.01, "ts": "2025-12-31T23:59:40.5Z"}',
                    '{"k": 0, "x": 1000000000000000.0, "b": true, "d": null, "ts": "2025-12-31T23:59:50.5Z"}',
                    '{"k": -2147483648, "x": 1.5, "b": false, "d": 0.00, "ts": "2025-12-31T23:59:40.5Z"}',
                    '{"k": 2147483647, "x": 0.0, "b": false, "d": -999999.00, "ts": '
                    '"2025-12-31T23:59:50.5Z"}',
                    '{"k": 10, "x": -2.25, "b": null, "d": 999999.00, "ts": "2025-12-31T23:59:51Z"}',
                    '{"k": 10, "x": 1000000000000000.0, "b": false, "d": null, "ts": "2026-01-01T00:04:51Z"}',
                    '{"k": -1, "x": 3.0, "b": true, "d": null, "ts": "2026-01-01T00:04:51.5Z"}',
                    '{"k": 5, "x": null, "b": null, "d": -999999.00, "ts": "2026-01-01T00:04:50.5Z"}',
                    '{"k": 4, "x": 0.0, "b": null, "d": 0.00, "ts": "2026-01-01T00:05:10.5Z"}',
                    '{"k": 5, "x": -2.25, "b": false, "d": 0.00, "ts": "2026-01-01T00:05:20.5Z"}',
                    '{"k": 100, "x": 1000000000000000.0, "b": null, "d": null, "ts": '
                    '"2026-01-01T00:05:25.5Z"}',
                    '{"k": null, "x": 100.125, "b": false, "d": 999999.00, "ts": "2026-01-01T00:05:22.5Z"}',
                    '{"k": 1, "x": 100.125, "b": false, "d": -1.50, "ts": "2026-01-01T00:05:42.5Z"}',
                    '{"k": null, "x": null, "b": true, "d": null, "ts": "2026-01-01T00:04:57.5Z"}',
                ]
            ]
        },
        "sinks": ["m9"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"m9": []},
        "mtimes": "reversed",
        "partitions": 1,
        "trigger_clock": None,
    }
)


@pytest.mark.parametrize(
    ("limit", "rows"),
    [
        ("OUTPUT EVERY 1 SECONDS", 5802),
        ("OUTPUT LAST EVERY 1 SECONDS", 332),
        ("OUTPUT EVERY 5 EVENTS", 5815),
        ("OUTPUT FIRST EVERY 4 EVENTS", 1454),
    ],
    ids=["all", "last", "all-events", "first-events"],
)
def test_a_limit_after_partitions_that_run_apart(spark: Any, tmp_path: Any, limit: str, rows: int) -> None:
    case = replace(CASE, script=CASE.script.replace("OUTPUT EVERY 1 SECONDS", limit))
    result = check_case(case, spark, None, tmp_path)
    assert len(result.streams["m9"]) == rows  # every partition's rows, each bucket let out
