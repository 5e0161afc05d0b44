"""Found by the differential fuzzer (tests/fuzz): seed 2234 (aimed soak, 2026-12-05), cut down by
hand.

A stream with a WATERMARK delay whose events an `ON SQL` update (UpdateSQL) takes, then a keyed
table written from a SELECT without the event time: the reference upserts the table in the order
the stream's events are released (event time, then arrival), so k=5's row is its event at 00:00:10,
which arrived first; Spark's table writer sorts a batch by the row's order key, which after an
UpdateSQL is the arrival position alone, and wrote the event at 00:00:01.5 last. Without the update
(a Map and Filter only) the writer knows the rows come in release order (operators.analysis
`in_release_order`, fuzzer seed 16016) and takes them as they come; an UpdateSQL runs a micro-batch's
statements in that order, in one partition, and passes its events on so: the writer now takes them
as they come after one too. The update itself, after a SELECT that dropped the event time, ran its
statements in arrival order (the second test): it now takes the Sequencer's events as they come.
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
        "script": "CREATE DATASTORE db TYPE sqlite;\n"
        "CREATE STREAMSCHEMA s1 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 MINUTE;\n"
        "CREATE SQLQUERY add_to ON db AS 'UPDATE acc SET total = total + ? WHERE k = ?';\n"
        "CREATE TABLE t3 (k integer, v integer, n1 bigint, PRIMARY KEY (k)) IN db;\n"
        "INSERT INTO w2 SELECT * FROM s1 ON SQL add_to, v, k, k, n1;\n"
        "INSERT INTO TABLE t3 SELECT k, v, n1 FROM w2;\n",
        "inputs": {
            "s1": [
                ['{"k": 5, "v": 1, "ts": "2026-01-01T00:00:10Z"}'],
                [
                    '{"k": 5, "v": 2, "ts": "2026-01-01T00:00:01.5Z"}',
                    '{"k": 9, "v": 3, "ts": "2026-01-01T01:00:00Z"}',
                ],
            ],
        },
        "sinks": ["w2"],
        "store": "sqlite",
        "tables": [
            {
                "name": "acc",
                "ddl": "CREATE TABLE acc (k bigint PRIMARY KEY, total bigint)",
                "columns": ("k", "total"),
                "rows": ((5, 0), (9, 0)),
            }
        ],
        "compare_tables": ["acc", "t3"],
        "max_files": None,
        "ordered": {"w2": []},
        "partitions": 1,
        "trigger_clock": None,
    }
)


@pytest.mark.parametrize("max_files", [None, 1])
@pytest.mark.parametrize("partitions", [1, 2])
def test_a_keyed_table_after_an_update_is_upserted_in_release_order(
    spark: Any, tmp_path: Any, partitions: int, max_files: int | None
) -> None:
    case = replace(CASE, partitions=partitions, max_files=max_files)
    ref = check_case(case, spark, None, tmp_path)
    assert sorted(ref.tables["t3"] or []) == [(5, 1, 1), (9, 3, 1)]  # k=5: its event at 00:00:10


@pytest.mark.parametrize("max_files", [None, 1])
@pytest.mark.parametrize("partitions", [1, 2])
def test_an_update_after_a_select_without_the_event_time_runs_in_release_order(
    spark: Any, tmp_path: Any, partitions: int, max_files: int | None
) -> None:
    """Found while probing the fix: the update itself, when a SELECT before it dropped the event
    time, sorted a micro-batch by `SEQ` alone (arrival), where the reference runs the statements in
    release order: `UPDATE acc SET total = ?` left k=5 at 2 on Spark, 1 on the reference, and the
    rows after it came in another order. The events come from the Sequencer in release order: the
    update now takes them as they come (deployer.spark.datastores.sql `_statement_order`)."""
    script = CASE.script.replace("total = total + ?", "total = ?").replace("add_to, v, k", "add_to, x, v")
    script = script.replace(
        "INSERT INTO w2 SELECT * FROM s1 ON",
        "INSERT INTO w1 SELECT k, v FROM s1;\nINSERT INTO w2 SELECT * FROM w1 ON",
    )
    case = replace(CASE, script=script, partitions=partitions, max_files=max_files)
    ref = check_case(case, spark, None, tmp_path)
    assert sorted(ref.tables["acc"] or []) == [(5, 1), (9, 3)]  # k=5: its event at 00:00:10, last


@pytest.mark.parametrize("max_files", [None, 1])
@pytest.mark.parametrize("partitions", [1, 2])
def test_a_sink_of_a_select_without_the_event_time_writes_in_release_order(
    spark: Any, tmp_path: Any, partitions: int, max_files: int | None
) -> None:
    """Found with the test above, and older: a sink of a delayed stream's SELECT that dropped the
    event time was written in arrival order on Spark (its writer sorted by `SEQ`), in release order on
    the reference; it now takes the Sequencer's rows as they come (deployer.spark.streams.sinks
    `sink_order`). The fuzzer's SELECTs kept the event time always; they now drop it now and then."""
    script = (
        "CREATE STREAMSCHEMA s1 WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 MINUTE;\n"
    )
    script += "INSERT INTO w1 SELECT k, v FROM s1 WHERE v > 0;\n"
    case = replace(
        CASE, script=script, sinks=["w1"], ordered={"w1": []}, store=None, tables=[], compare_tables=[]
    )
    case = replace(case, partitions=partitions, max_files=max_files)
    ref = check_case(case, spark, None, tmp_path)
    assert [r["v"] for r in ref.streams["w1"]] == [2, 1, 3]  # 00:00:01.5, 00:00:10, 01:00:00


@pytest.mark.parametrize("max_files", [None, 1])
@pytest.mark.parametrize("partitions", [1, 2])
def test_a_read_after_a_select_without_the_event_time_passes_its_rows_in_release_order(
    spark: Any, tmp_path: Any, partitions: int, max_files: int | None
) -> None:
    """The same, through an `ON SQL` read (ReadSQL): its results come in its events' order, so a sink
    and a keyed table after it take them as they come; sorted by `SEQ` (before: a read ended the
    walk of `in_release_order`), they were in arrival order on Spark."""
    script = CASE.script.replace(
        "'UPDATE acc SET total = total + ? WHERE k = ?'", "'SELECT total FROM acc WHERE k = ?'"
    )
    script = script.replace("n1 bigint", "total varchar").replace(
        "SELECT k, v, n1 FROM", "SELECT k, v, total FROM"
    )
    script = script.replace(
        "INSERT INTO w2 SELECT * FROM s1 ON SQL add_to, v, k, k, n1",
        "INSERT INTO w1 SELECT k, v FROM s1;\nINSERT INTO w2 SELECT * FROM w1 ON SQL add_to, x, k, total",
    )
    case = replace(CASE, script=script, partitions=partitions, max_files=max_files)
    ref = check_case(case, spark, None, tmp_path)
    assert [r["v"] for r in ref.streams["w2"]] == [2, 1, 3]  # 00:00:01.5, 00:00:10, 01:00:00
    assert sorted(ref.tables["t3"] or []) == [(5, 1, "0"), (9, 3, "0")]
