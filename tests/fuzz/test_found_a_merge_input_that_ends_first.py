"""Found by the differential fuzzer (tests/fuzz): seed 38205, minimized by hand.

A TIME window over a Union, one of whose inputs ends (its last event at 00:00:12) long before the
other (01:00:00.25). The reference dropped the input that ended from the merge's watermark, which
then went to the other's, and fired the windows past 00:00:12; Spark's watermark is the least of
its streams', the one that ended holding at its last. The reference's merge now holds at an ended
input's final watermark too (deployer/local/runtime.py `Merger.watermark`; docs/language.md,
"Merges"); an input that ended without events still does not count.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]


def _events(times: list[str]) -> list[str]:
    return [json.dumps({"k": i, "ts": f"2026-01-01T{t}Z"}) for i, t in enumerate(times)]


CASE = Case(
    script="CREATE STREAMSCHEMA s1 WITH k integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA s2 WITH k integer, ts timestamp TIMESTAMP BY ts;\n"
    "INSERT INTO u1 SELECT * FROM s1, s2;\n"
    "INSERT INTO a7 SELECT count(*) AS n, window_start() AS ws FROM u1 WINDOW TIME SIZE 1500 ms ADVANCE 500 ms;\n",
    inputs={"s1": [_events(["00:00:10", "00:00:12"])], "s2": [_events(["00:00:00", "01:00:00.25"])]},
    sinks=["a7"],
    max_files=2,
    partitions=1,
)


def test_engines_agree(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
