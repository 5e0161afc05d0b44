"""Found by the differential fuzzer (tests/fuzz): seed 39106 (45-minute soak), minimized by hand.

A TIME window over a Union of s1 and s2, grouped by `v + 9223372036854775807`, which overflows (the
event is dead-lettered) for every event of s2. The reference's merge watermark counts s2's events
(docs/language.md, "Merges") and fired the windows up to s2's last event; Spark fired none. Its
optimizer pushed the aggregate's split of the failing events, a filter that does not read the event
time, through the Union and below the watermark declared on what s2's Sequencer releases
(PushPredicateThroughNonJoin): that watermark saw no event, so it stayed at 0, and so did the
merge's. A WHERE that fails on s2's events (its split comes before the observation that counts what
it drops) did the same. Fixed in deployer/spark/streams/sources.py: an observation right on each
merged stream's watermark, which the optimizer pushes no filter through. The case as found also
had a WHERE FALSE reading the window's rows, late events and an empty first file in s2, reversed
modification times and two state partitions: none of it mattered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

HEAD = (
    "CREATE STREAMSCHEMA s1 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA s2 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "INSERT INTO u SELECT * FROM s1, s2;\n"
)
WINDOW = "SELECT k, count(*) AS n, window_end() AS we FROM {} WINDOW TIME SIZE 2 SECONDS GROUP BY k"


def _events(rows: list[tuple[int, int, str]]) -> list[str]:
    return [json.dumps({"k": k, "v": v, "ts": f"2026-01-01T00:00:{t}Z"}) for k, v, t in rows]


def _case(statements: str) -> Case:
    """s1's events have v = 0, s2's v = 1: those fail the statements after the Union."""
    return Case(
        script=HEAD + statements,
        inputs={
            "s1": [_events([(0, 0, "00"), (1, 0, "01"), (0, 0, "05"), (1, 0, "10")])],
            "s2": [_events([(2, 1, "00.5"), (2, 1, "03"), (2, 1, "08")])],
        },
        sinks=["o"],
        ordered={"o": ["k"]},
        partitions=1,
    )


@pytest.mark.parametrize(
    "case",
    [
        _case(f"INSERT INTO o {WINDOW.format('u')}, v + 9223372036854775807;\n"),
        _case(f"INSERT INTO f SELECT * FROM u WHERE 1 / (v - 1) < 0;\nINSERT INTO o {WINDOW.format('f')};\n"),
    ],
    ids=["a-group-key", "a-where"],
)
def test_a_merge_input_whose_events_all_fail_still_moves_the_watermark(
    case: Case, spark: Any, tmp_path: Any
) -> None:
    check_case(case, spark, None, tmp_path)
