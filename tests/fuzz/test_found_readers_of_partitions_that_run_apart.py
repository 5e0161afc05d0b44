"""Found by the differential fuzzer (tests/fuzz), seed 7702, then probed by hand: a later statement
that reads a pattern's output with PARTITION BY and depends on the order of its rows.

The case of test_found_a_limit_after_partitions_that_run_apart.py without its OUTPUT clause: one
micro-batch brings every event, partition k = 1 makes its matches up to 00:05:42.5 at once, while
the other partitions' absences wait for the watermark and fire a micro-batch later. The pattern's
own rows are the same on both engines, in time order per partition; across partitions Spark's come
as its micro-batches bring them. A TUPLE window over them counted them in that order (19,548 rows on
each engine, other ones), and so did `FIRST EVERY n EVENTS` on a statement reading them. Such a
reader now reads them in time order once the watermark has passed them (cpl.plan_order, an
OutputRate `IN TIME ORDER` before a window; the limit itself waits so), on both engines
(docs/language.md, "Patterns").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fuzz_harness import check_case
from test_found_a_limit_after_partitions_that_run_apart import CASE

pytestmark = [pytest.mark.spark]

PATTERN = CASE.script.replace(" OUTPUT EVERY 1 SECONDS", "")


@pytest.mark.parametrize(
    ("reader", "rows"),
    [
        ("INSERT INTO w1 SELECT count(*) AS n, sum(c7) AS s FROM m9 WINDOW TUPLE SIZE 3;\n", 1938),
        ("INSERT INTO w1 SELECT c7 AS n, t6 AS s FROM m9 OUTPUT FIRST EVERY 3 EVENTS;\n", 1939),
    ],
    ids=["tuple-window", "first-events"],
)
def test_a_reader_of_partitions_that_run_apart(spark: Any, tmp_path: Any, reader: str, rows: int) -> None:
    case = replace(CASE, script=PATTERN + reader, sinks=["w1"], ordered={"w1": []})
    result = check_case(case, spark, None, tmp_path)
    assert len(result.streams["w1"]) == rows


def test_upserts_of_partitions_that_run_apart(spark: Any, tmp_path: Any) -> None:
    """A table keyed by other than the partition key: the last row to a key wins, the latest in time
    on both engines (not the one Spark's micro-batches brought last)."""
    script = (
        "CREATE DATASTORE db TYPE sqlite;\n"
        "CREATE TABLE tk (pos boolean, k bigint, t timestamp, PRIMARY KEY (pos)) IN db;\n"
        + PATTERN
        + "INSERT INTO TABLE tk SELECT coalesce(c7 > 0, FALSE) AS pos, c7 AS k, t6 AS t FROM m9;\n"
    )
    case = replace(CASE, script=script, sinks=[], ordered={}, store="sqlite", compare_tables=["tk"])
    result = check_case(case, spark, None, tmp_path)
    assert len(result.tables["tk"]) == 2
