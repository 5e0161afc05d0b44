"""Found by the differential fuzzer (tests/fuzz): seed 3511 (15-minute soak, 2026-12-06).

A TUPLE window grouped by `k` and `k * 9223372036854775807`, whose text aggregate keeps its state per
group (deployer.spark.windows.window_state): the group of `k = -1` came out with the key
-9223372036854775808 on Spark, -9223372036854775807 on the reference. PySpark (4.3) makes a bigint
column of a processor's rows from Arrow through pandas' `astype` from Arrow's type, which rounds
some values when the column has a NULL (another group's key here), though the session asks for
pandas' nullable integers (preferIntExtensionDtype). Fixed: the bigint columns cross into that
processor as text and are read back exactly (deployer.spark.windows.held_events `longs_as_text`,
`exact_longs`). The windows over numbers pack their events as Arrow (tuple_buckets), and the
OUTPUT limiter's values cross as JSON: neither met it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

from deployer.spark.windows.held_events import exact_longs

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, x double, ts timestamp TIMESTAMP BY ts "
        "WATERMARK 5 SECONDS;\n"
        "CREATE WINDOW w6 AS TUPLE SIZE 2 ADVANCE 1;\n"
        "INSERT INTO m3 SELECT k, x, ts, CASE WHEN TRUE THEN k END AS c1, CAST('1.25' AS "
        "decimal(6, 2)) AS c2 FROM s1;\n"
        "INSERT INTO a7 SELECT k, (k * 9223372036854775807) AS g4, count(substring('', 1, 1)) "
        "AS a5 FROM m3 WINDOW w6 GROUP BY k, (k * 9223372036854775807) OUTPUT ALL EVERY 2 "
        "EVENTS;\n"
        "INSERT INTO m8 SELECT k, g4 FROM a7 GROUP BY (k * 9223372036854775807) OUTPUT LAST "
        "EVERY 5 EVENTS;\n",
        "inputs": {
            "s1": [
                ['{"k": 1, "x": 2.5, "ts": "2026-01-01T00:00:10Z"}'],
                [
                    '{"k": -2147483648, "x": 2.5, "ts": "2026-01-01T00:00:10Z"}',
                    '{"k": null, "x": 0.0, "ts": "2026-01-01T00:00:30Z"}',
                    '{"k": -2147483648, "x": 0.1, "ts": "2026-01-01T00:00:35Z"}',
                    '{"k": 7, "x": 1.5, "ts": "2026-01-01T00:00:55Z"}',
                    '{"k": -1, "x": -0.5, "ts": "2026-01-01T00:01:05Z"}',
                    '{"k": 100, "x": 1.5, "ts": "2026-01-01T00:01:04Z"}',
                    '{"k": -1, "x": -2.25, "ts": "2026-01-01T00:01:03Z"}',
                    '{"k": 0, "x": 0.1, "ts": "2026-01-01T00:01:04.5Z"}',
                    '{"k": "abc", "x": null, "ts": "2026-01-01T00:01:05Z"}',
                    '{"k": -1, "x": 0.0, "ts": "2026-01-01T00:01:15Z"}',
                    '{"k": null, "x": null, "ts": "2026-01-01T00:01:05Z"}',
                    '{"k": 10, "x": 0.0, "ts": "2026-01-01T00:01:15Z"}',
                    '{"k": 100, "x": 1000000000000000.0, "ts": "2026-01-01T00:01:15Z"}',
                    '{"k": null, "x": null, "ts": "2026-01-01T00:01:14.5Z"}',
                    '{"k": 5, "x": null, "ts": "2026-01-01T00:01:14.75Z"}',
                    '{"k": null, "x": -0.5, "ts": "2026-01-01T00:01:34.75Z"}',
                    '{"k": -2147483648, "x": -0.5, "ts": "2026-01-01T00:01:34.25Z"}',
                    '{"k": 0, "x": -2.25, "ts": "2026-01-01T00:01:36.25Z"}',
                    '{"k": 100, "x": null, "ts": "2026-01-01T00:02:36.25Z"}',
                ],
                [
                    '{"k": null, "x": 1.5, "ts": "2026-01-01T00:03:06.25Z"}',
                    '{"k": null, "x": 0.0, "ts": "2026-01-01T00:03:06.25Z"}',
                ],
            ]
        },
        "sinks": ["m3", "m8"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 1,
        "ordered": {"m3": [], "a7": [], "m8": []},
        "mtimes": "equal",
        "partitions": 2,
        "trigger_clock": None,
    }
)


def test_a_bigint_group_key_beside_a_null_keeps_its_value(spark: Any, tmp_path: Any) -> None:
    ref = check_case(CASE, spark, None, tmp_path)
    assert (-1, -9223372036854775807) in {(r["k"], r["g4"]) for r in ref.streams["m8"]}


@pytest.mark.parametrize("value", [-9223372036854775807, 9223372036854775807, 2**53 + 1, -(2**53) - 1])
def test_bigints_read_back_from_text_are_exact(value: int) -> None:
    frame = pd.DataFrame({"_k0": [str(value), None, "0"], "_v": ["a", "b", "c"]})
    exact_longs(frame, ("_k0",))
    assert frame["_k0"].tolist()[0] == value and frame["_k0"].isna().tolist() == [False, True, False]
    assert frame["_k0"].dtype == "Int64"
