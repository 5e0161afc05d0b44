"""Found probing seed 3511's divergence (2026-12-06): a stream with a WATERMARK delay, its events out
of order within it, and a SELECT that drops its event time before what takes rows in order.

The reference takes the stream's events as it releases them (event time, then arrival), and so does
everything after the SELECT; on Spark the stream's Sequencer releases them in that order, but a
TUPLE window (over numbers, per bucket of groups, or over text, per group), a BATCH window and an
OUTPUT limit sort a micro-batch by `SEQ` alone once the event time is gone: arrival order. (Sinks,
keyed tables and updates take such rows as they come: seeds 16016 and 2234.) Fixed: such a Map puts
the event time's order key in front of its rows' `SEQ` (deployer.spark.translate.stateless.
map_in_release_order), on a checkpoint of this layout (deployer.spark.run.layout.release_order).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

from deployer.spark.run.layout import release_order

pytestmark = [pytest.mark.spark]

_EVENTS = [  # (k, v, seconds): out of order within the WATERMARK, some at equal times
    (1, 10, 10), (2, 20, 30), (3, 30, 65), (1, 40, 64), (2, 50, 63), (3, 60, 64.5),
    (1, 70, 75), (2, 80, 74.5), (3, 90, 74.75), (1, 100, 94.75), (2, 110, 94.25), (3, 120, 96.25),
]  # fmt: skip
_ROWS = [
    f'{{"k": {k}, "v": {v}, "ts": "2026-01-01T00:{int(s) // 60:02d}:{s % 60:06.3f}Z"}}' for k, v, s in _EVENTS
]
STATEMENTS = {
    "tuple_numbers": "SELECT k, sum(v) AS total, count(*) AS n FROM kv WINDOW TUPLE SIZE 3 GROUP BY k",
    "tuple_text": "SELECT max(CAST(v AS varchar)) AS top, min(v) AS low FROM kv WINDOW TUPLE SIZE 4",
    "batches": "SELECT count(*) AS n, min(v) AS first FROM kv WINDOW BATCH START v % 20 = 0 STOP v % 30 = 0",
    "first_n": "SELECT k, v FROM kv OUTPUT FIRST EVERY 3 EVENTS",
    "last_per_group": "SELECT k, v FROM kv GROUP BY k OUTPUT LAST EVERY 4 EVENTS",
    "all_n": "SELECT k, v FROM kv OUTPUT ALL EVERY 5 EVENTS",
}
CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s WITH k integer, v integer, ts timestamp TIMESTAMP BY ts "
        "WATERMARK 5 SECONDS;\n"
        "INSERT INTO kv SELECT k, v FROM s;\n"
        + "".join(f"INSERT INTO {name} {text};\n" for name, text in STATEMENTS.items()),
        "inputs": {"s": [_ROWS[:1], _ROWS[1:7], _ROWS[7:]]},
        "sinks": list(STATEMENTS),
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 1,
        "ordered": {name: [] for name in STATEMENTS},
        "partitions": 2,
    }
)


@pytest.mark.parametrize("max_files", [None, 1])
def test_what_takes_rows_in_order_takes_a_delayed_streams_in_release_order(
    spark: Any, tmp_path: Any, max_files: int | None
) -> None:
    ref = check_case(replace(CASE, max_files=max_files), spark, None, tmp_path)
    # the first of every three events in release order (10 20 50 | 40 60 30 | 80 90 70 | 110 100
    # 120), where arrival order would let 10, 40, 70 and 100 out
    assert [r["v"] for r in ref.streams["first_n"]] == [10, 40, 80, 110]


def test_a_checkpoint_of_the_layout_before_keeps_its_ids(tmp_path: Path) -> None:
    """`SEQ` is an update's event id and is kept in state: a checkpoint some query ran on without the
    layout's mark keeps the Maps as they were; a new one is marked, and stays so."""
    fresh = tmp_path / "fresh"
    assert release_order(fresh) and release_order(fresh)
    earlier = tmp_path / "earlier"
    (earlier / "q1" / "offsets").mkdir(parents=True)
    (earlier / "q1" / "offsets" / "0").write_text("v1")
    assert not release_order(earlier)
    assert not list(earlier.glob("selects-*"))
    (fresh / "q1" / "offsets").mkdir(parents=True)
    (fresh / "q1" / "offsets" / "0").write_text("v1")
    assert release_order(fresh)  # its own mark
