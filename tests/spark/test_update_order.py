"""An UpdateSQL runs its statements in event order on Spark as on the reference, whatever the
partitions a micro-batch comes in (deployer.spark.datastores.sql `update_sql`).

A file source splits a micro-batch of many files into partitions of consecutive files
(deployer.spark.streams.file_source `FILES_PER_PARTITION`), which Spark's tasks run side by side.
Each UpdateSQL here appends its event's value to a text column: the text is the order the
statements ran in. Before the UpdateSQL took its micro-batch in one partition, a stream without
event time came out in the order the tasks reached the store (one run in four here), and a stream
with event time, once its source split it too, in every run.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    T0,
    assert_same,
    assert_same_dead_letters,
    compile_text,
    iso,
    prepare,
    run_reference,
    run_spark,
    sqlite_rows,
    sqlite_store,
)

from deployer.runner import bind_stores
from deployer.spark.streams.file_source import FILES_PER_PARTITION

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA a WITH k integer, v integer{ts};
CREATE DATASTORE crm TYPE sqlite;
CREATE SQLQUERY append ON crm AS 'UPDATE trail SET seen = seen || char(32) || ? WHERE k = ?';
INSERT INTO done SELECT k, v, r.n FROM a ON SQL append, r, v, k, n;
"""
FILES = 2 * FILES_PER_PARTITION + 8  # one micro-batch, three partitions


def _store(path: Path) -> str:
    return sqlite_store(
        path,
        "CREATE TABLE trail (k integer PRIMARY KEY, seen text); INSERT INTO trail VALUES (0, ''), (1, '');",
    )


def _trail(url: str) -> list[tuple[Any, ...]]:
    return sqlite_rows(url, "SELECT k, seen FROM trail ORDER BY k")


def _files(timed: bool) -> list[list[dict[str, Any]]]:
    """Three events a file, values growing in arrival order; with event time, in order too."""
    return [
        [
            {"k": j % 2, "v": 10 * f + j, **({"ts": iso(T0 + timedelta(seconds=f))} if timed else {})}
            for j in range(3)
        ]
        for f in range(FILES)
    ]


@pytest.mark.parametrize("timed", [False, True], ids=["no event time", "event time"])
def test_update_sql_runs_in_event_order_across_partitions(spark: Any, tmp_path: Path, timed: bool) -> None:
    graph = compile_text(SCRIPT.format(ts=", ts timestamp TIMESTAMP BY ts" if timed else ""))
    sources = prepare(tmp_path, {"a": _files(timed)})
    ref_url, spark_url = _store(tmp_path / "ref.sqlite3"), _store(tmp_path / "spark.sqlite3")
    ref = run_reference(graph, tmp_path / "ref", sources, ["done"], bind_stores(graph, {"crm": ref_url}))
    spk = run_spark(
        spark, graph, tmp_path / "spark", sources, ["done"], stores=bind_stores(graph, {"crm": spark_url})
    )
    assert_same(ref, spk, "done", min_rows=3 * FILES, ordered=True)
    assert_same_dead_letters(ref, spk)
    expected = [
        (k, "".join(f" {10 * f + j}" for f in range(FILES) for j in range(3) if j % 2 == k)) for k in (0, 1)
    ]
    assert _trail(ref_url) == expected
    assert _trail(spark_url) == expected
