"""Found by the differential fuzzer (tests/fuzz): seed 97002, minimized by hand.

An UpdateSQL, then a TIME window with `OUTPUT SNAPSHOT` (a limiter: a stateful operator after the
window's), with one state partition. The UpdateSQL takes its micro-batch in one partition, and
Spark's single partition satisfies every stateful operator's distribution when the state has one
partition: the window's aggregation and the limiter ran in one task, and Spark 4.1's RocksDB store
refused the limiter's state (`Can only upgrade readStore to writeStore with the same stateStoreId`:
the aggregation leaves the store it read in the task for its own write, and the next operator
took it). The query failed; the reference ran. Fixed: the UpdateSQL puts its rows in one of two
partitions, which no stateful operator takes as its own (deployer/spark/datastores/sql.py
`update_sql`). The fuzzer's case had the UpdateSQL over a merge, which took one partition before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case, StoreTable
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

HEAD = """CREATE DATASTORE db TYPE sqlite;
CREATE STREAMSCHEMA s1 WITH k integer, x double, ts timestamp TIMESTAMP BY ts WATERMARK 5 SECONDS;
CREATE SQLQUERY log_it ON db AS 'INSERT INTO log (k, v) VALUES (?, ?)';
"""
WINDOW = """INSERT INTO a13 SELECT k, sum(k) AS a9 FROM w8 WINDOW TIME SIZE 30 SECONDS GROUP BY k
  OUTPUT SNAPSHOT EVERY 1 SECOND;
"""
SCRIPTS = {
    "over a stream": HEAD
    + "INSERT INTO w8 SELECT * FROM s1 WHERE k IN (7) ON SQL log_it, x, k, k, n7;\n"
    + WINDOW,
    "over a merge": HEAD
    + "CREATE TRIGGER tr2 AT '0 0 * * * ?';\n"
    + "INSERT INTO m3 SELECT 1 AS k, 0.5 AS x, triggered_time AS ts FROM tr2;\n"
    + "INSERT INTO u4 SELECT * FROM s1, m3;\n"
    + "INSERT INTO w8 SELECT * FROM u4 WHERE k IN (7) ON SQL log_it, x, k, k, n7;\n"
    + WINDOW,
}
EVENTS = [
    {"k": 5, "x": 1.5, "ts": "2026-01-01T00:00:05Z"},
    {"k": 7, "x": -2.25, "ts": "2026-01-01T00:00:15Z"},
    {"k": 100, "x": 1e15, "ts": "2026-01-01T00:00:15.5Z"},
    {"k": 7, "x": 0.0, "ts": "2026-01-01T00:00:47Z"},
    {"k": 3, "x": 3.0, "ts": "2025-12-31T23:59:32Z"},
]


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_engines_agree(spark: Any, tmp_path: Any, script: str) -> None:
    case = Case(
        script=SCRIPTS[script],
        inputs={"s1": [[json.dumps(e) for e in EVENTS]]},
        sinks=["a13"],
        store="sqlite",
        tables=[StoreTable("log", "CREATE TABLE log (k bigint, v bigint)", ("k", "v"))],
        compare_tables=["log"],
        partitions=1,
        trigger_clock="2026-01-01T00:00:02.5Z/2026-01-01T00:00:32.5Z",
    )
    check_case(case, spark, None, tmp_path)
