"""Found by the differential fuzzer (tests/fuzz): seed 1824, minimized by hand.

A stream that meets itself in a merge (`FROM s2, m11`, m11 a WHERE over s2) passes a Sequencer that
releases it strictly below its watermark (an event of the other input may come later at the same
time and go first), and a self-join of it over TIME windows. Its event at 00:00:05.5, the largest of
the first file, was released only at the end, two micro-batches later (the other files hold only
late events), when Spark's watermark, declared before the Sequencer, had been at 00:00:05.5 since
the first: Spark's join takes a row at or behind the watermark as late and dropped it (j2: 2 rows on
the reference, 1 on Spark; in the fuzzer's case, whose join emitted nothing, 7 late events against
5: the rows a stateful operator drops count as late). Such a stream's watermark is now declared on
what its Sequencer releases, as a merge's is (deployer/spark/streams/sources.py `sequence`).

The probe found the general case (the third test): any stream's event at the time of its largest
earlier one, two micro-batches later, was dropped by Spark's join. Each side's watermark is now on a
copy of its event time a microsecond on (deployer/spark/translate/ties.py;
tests/spark/test_ties_at_the_watermark.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

SCRIPT = (
    "CREATE STREAMSCHEMA s2 WITH k integer, ts timestamp TIMESTAMP BY ts;\n"
    "INSERT INTO j2 SELECT l.k AS k, l.ts AS ts, r.ts AS r_ts FROM s2 AS l WINDOW TIME SIZE 1 MINUTE, "
    "s2 AS r WINDOW TIME SIZE 1 MINUTE WHERE l.k = r.k;\n"
    "INSERT INTO m11 SELECT k, ts FROM s2 WHERE k > 100;\n"
    "INSERT INTO u13 SELECT * FROM s2, m11;\n"
)
FILES = [
    [
        '{"k": 3, "ts": "2026-01-01T00:00:05Z"}',
        '{"k": 1, "ts": "2026-01-01T00:00:05.5Z"}',
        '{"k": 1, "ts": "2025-12-31T23:59:20.5Z"}',
    ],
    ['{"k": 1, "ts": "2025-12-31T23:59:10.5Z"}', '{"k": 0, "ts": "2025-12-31T23:59:08.5Z"}'],
    ['{"k": 5, "ts": "2025-12-31T23:59:09Z"}', "{not json"],
]


@pytest.mark.parametrize("partitions", [1, 2])
def test_a_self_merged_event_released_at_the_watermark_is_joined(
    spark: Any, tmp_path: Any, partitions: int
) -> None:
    case = Case(
        script=SCRIPT,
        inputs={"s2": FILES},
        sinks=["j2", "u13"],
        ordered={"j2": [], "u13": []},
        max_files=1,
        partitions=partitions,
    )
    ref = check_case(case, spark, None, tmp_path)
    assert len(ref.streams["j2"]) == 2  # each on-time event paired with itself


def test_an_event_at_the_watermark_two_micro_batches_later_is_joined(spark: Any, tmp_path: Any) -> None:
    """Not a self-merge: an event at the time of the stream's largest one, two files (micro-batches)
    later, is not late in the language (it is not behind the watermark) and pairs; Spark's join took
    a row at or behind its watermark as late and dropped it."""
    script = SCRIPT.split("INSERT INTO m11")[0]
    files = [
        ['{"k": 1, "ts": "2026-01-01T00:00:15Z"}'],
        ['{"k": 2, "ts": "2026-01-01T00:00:10Z"}'],
        ['{"k": 3, "ts": "2026-01-01T00:00:15Z"}'],
    ]
    case = Case(
        script=script, inputs={"s2": files}, sinks=["j2"], ordered={"j2": []}, max_files=1, partitions=1
    )
    check_case(case, spark, None, tmp_path)
