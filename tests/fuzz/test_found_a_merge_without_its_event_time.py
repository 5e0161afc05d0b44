"""Found probing the fuzzer's SELECTs that drop the event time (2026-12-05), before a soak drew it.

A merge with event time (`FROM s1, s2`), then a SELECT that drops it: the reference passes the
merge's rows on in its order (event time, then input, then arrival), and what reads them after
keeps it; on Spark a micro-batch of the merge comes input by input, which a sink, a keyed table or
an `ON SQL` update sorted by `SEQ` alone (the event time was gone): s1's rows, then s2's. Fixed: such
a Map puts the event time's order key in front of its rows' `SEQ` (deployer.spark.translate.
stateless.map_in_time_order), on a checkpoint of this layout (deployer.spark.run.layout.merge_order).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fuzz_case import StoreTable, case_from_dict
from fuzz_harness import check_case

from deployer.spark.run.layout import merge_order

pytestmark = [pytest.mark.spark]

_SCHEMA = "k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 MINUTE"
CASE = case_from_dict(
    {
        "script": "CREATE DATASTORE db TYPE sqlite;\n"
        f"CREATE STREAMSCHEMA s1 WITH {_SCHEMA};\n"
        f"CREATE STREAMSCHEMA s2 WITH {_SCHEMA};\n"
        "CREATE TABLE t1 (k integer, v integer, PRIMARY KEY (k)) IN db;\n"
        "INSERT INTO m SELECT * FROM s1, s2;\n"
        "INSERT INTO w1 SELECT k, v FROM m WHERE v > 0;\n"
        "INSERT INTO TABLE t1 SELECT k, v FROM w1;\n",
        "inputs": {
            "s1": [
                ['{"k": 5, "v": 1, "ts": "2026-01-01T00:00:10Z"}'],
                [
                    '{"k": 5, "v": 2, "ts": "2026-01-01T00:00:01.5Z"}',
                    '{"k": 7, "v": 3, "ts": "2026-01-01T00:00:20Z"}',
                    '{"k": 9, "v": 4, "ts": "2026-01-01T01:00:00Z"}',
                ],
            ],
            "s2": [
                ['{"k": 5, "v": 5, "ts": "2026-01-01T00:00:05Z"}'],
                [
                    '{"k": 7, "v": 6, "ts": "2026-01-01T00:00:20Z"}',
                    '{"k": 9, "v": 7, "ts": "2026-01-01T01:00:00Z"}',
                ],
            ],
        },
        "sinks": ["w1"],
        "store": "sqlite",
        "tables": [],
        "compare_tables": ["t1"],
        "max_files": None,
        "ordered": {"w1": []},
        "partitions": 1,
    }
)
# the merge's order: event time, then input (s1 before s2 at 00:00:20 and at 01:00:00)
IN_TIME_ORDER = [2, 5, 1, 3, 6, 4, 7]


@pytest.mark.parametrize("max_files", [None, 1])
@pytest.mark.parametrize("partitions", [1, 2])
def test_a_select_without_the_event_time_keeps_the_merges_order(
    spark: Any, tmp_path: Any, partitions: int, max_files: int | None
) -> None:
    ref = check_case(replace(CASE, partitions=partitions, max_files=max_files), spark, None, tmp_path)
    assert [r["v"] for r in ref.streams["w1"]] == IN_TIME_ORDER
    assert sorted(ref.tables["t1"] or []) == [(5, 1), (7, 6), (9, 7)]  # the last of each key


@pytest.mark.parametrize("watermark", ["", " WATERMARK 1 MINUTE"])
def test_two_sinks_of_one_query_keep_it(spark: Any, tmp_path: Any, watermark: str) -> None:
    """Two sinks computed without state share one query (deployer.spark.run.shared), whose
    micro-batch graphs translate the Map as the deployment's does; with and without a delay."""
    script = CASE.script.replace(" WATERMARK 1 MINUTE", watermark)
    script = script.replace(
        "INSERT INTO TABLE t1 SELECT k, v FROM w1;\n", "INSERT INTO w2 SELECT v FROM m;\n"
    )
    case = replace(CASE, script=script, sinks=["w1", "w2"], ordered={"w1": [], "w2": []}, compare_tables=[])
    ref = check_case(case, spark, None, tmp_path)
    late = [] if watermark else [2]  # without a delay, 00:00:01.5 is behind s1's 00:00:10
    assert [r["v"] for r in ref.streams["w2"]] == [v for v in IN_TIME_ORDER if v not in late]


def test_an_update_after_it_runs_in_the_merges_order(spark: Any, tmp_path: Any) -> None:
    script = CASE.script.replace(
        "CREATE TABLE t1 (k integer, v integer, PRIMARY KEY (k)) IN db;\n",
        "CREATE SQLQUERY set_to ON db AS 'UPDATE acc SET total = ? WHERE k = ?';\n",
    ).replace(
        "INSERT INTO TABLE t1 SELECT k, v FROM w1;\n",
        "INSERT INTO w2 SELECT * FROM w1 ON SQL set_to, x, v, k, n;\n",
    )
    table = StoreTable(
        "acc",
        "CREATE TABLE acc (k bigint PRIMARY KEY, total bigint)",
        ("k", "total"),
        ((5, 0), (7, 0), (9, 0)),
    )
    case = replace(
        CASE, script=script, sinks=["w2"], ordered={"w2": []}, tables=[table], compare_tables=["acc"]
    )
    ref = check_case(case, spark, None, tmp_path)
    assert sorted(ref.tables["acc"] or []) == [(5, 1), (7, 6), (9, 7)]


def test_a_checkpoint_of_the_layout_before_keeps_its_ids(tmp_path: Path) -> None:
    """`SEQ` is an update's event id and is kept in state: a checkpoint some query ran on without the
    layout's mark keeps the Maps as they were; a new one is marked, and stays so."""
    fresh = tmp_path / "fresh"
    assert merge_order(fresh) and merge_order(fresh)
    earlier = tmp_path / "earlier"
    (earlier / "q1" / "offsets").mkdir(parents=True)
    (earlier / "q1" / "offsets" / "0").write_text("v1")
    assert not merge_order(earlier)
    assert not list(earlier.glob("selects-*"))
    (fresh / "q1" / "offsets").mkdir(parents=True)
    (fresh / "q1" / "offsets" / "0").write_text("v1")
    assert merge_order(fresh)  # its own mark
