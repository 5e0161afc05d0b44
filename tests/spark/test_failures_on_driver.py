"""A table's or a sink's rows after a data store call, through Maps that cannot fail, with that
call's failures: the query runs each row with its error and failed event beside it, and its
foreachBatch splits the one collected batch on the driver (deployer.spark.run.failures
`_split_on_driver`) where it persisted the batch and built its split, Maps and shape in every
micro-batch. A run resumed from its checkpoint with more files has the reference executor's tables,
sink and dead letters, each once; the rows of one table key are upserted in the reference's order,
over files cut differently.
"""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from spark_helpers import (
    T0,
    assert_same,
    assert_same_dead_letters,
    collect,
    compile_text,
    iso,
    prepare,
    run_deployment,
    run_reference,
    sqlite_rows,
)

from deployer.runner import bind_stores
from deployer.spark.run.failures import SPLIT_EVENT
from deployer.spark.run.queries import plan_queries, store_kinds

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

# The reads of "big" fail (a value that does not fit RETURNS' integer), the others go on through a
# Map that cannot fail (projections only) to a sink and two tables, one appended, one upserted by
# key. "a" has two rows, upserted in the query's order: ORDER BY gives one (without it the store's
# order is SQL's unspecified one, which the two engines' reads need not share: docs/language.md).
SCRIPT = """
CREATE STREAMSCHEMA ev WITH id integer, name varchar, ts timestamp TIMESTAMP BY ts;
CREATE DATASTORE crm TYPE postgresql;
CREATE DATASTORE out TYPE sqlite;
CREATE SQLQUERY look ON crm AS 'SELECT v FROM lk WHERE name = ? ORDER BY v' RETURNS (v integer);
CREATE TABLE found (id integer, name varchar, v integer) IN out;
CREATE TABLE latest (name varchar PRIMARY KEY, id integer, v integer) IN out;
INSERT INTO TABLE found SELECT id, name, l.v AS v FROM ev ON SQL look, l, name, v;
INSERT INTO TABLE latest SELECT name, id, l.v AS v FROM ev ON SQL look, l, name, v;
INSERT INTO enriched SELECT id, l.v AS v, name FROM ev ON SQL look, l, name, v;
"""
SINKS = ["enriched"]
TABLES = {"found": "SELECT id, name, v FROM found", "latest": "SELECT name, id, v FROM latest"}


def _events(n: int) -> list[dict[str, Any]]:
    names = ["a", "b", "big", "c", "big"]
    return [{"id": i, "name": names[i % 5], "ts": iso(T0 + timedelta(seconds=i))} for i in range(n)]


def _tables(url: str) -> dict[str, list[tuple[Any, ...]]]:
    return {name: sorted(sqlite_rows(url, query)) for name, query in TABLES.items()}


def test_a_resumed_run_has_the_references_tables_and_dead_letters(
    spark: Any, tmp_path: Path, pg_db: str
) -> None:
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE lk (name text, v bigint)")
        conn.execute("INSERT INTO lk VALUES ('a', 7), ('b', 8), ('a', 9), ('big', 10000000000)")
    events = _events(40)
    files = [events[i : i + 5] for i in range(0, 40, 5)]
    graph = compile_text(SCRIPT)
    plan = plan_queries(graph, SINKS, {"ev": "file:x"}, store_kinds(None))
    writes = {q.name: q.writes for q in plan}
    assert not [n for n in writes if n.startswith("failed:")], writes
    assert [w for w in writes["table:found"] if w.startswith("failures of ")], writes
    assert [w for w in writes["sink:enriched"] if w.startswith("failures of ")], writes

    ref_url = f"sqlite:///{tmp_path}/ref.sqlite3"
    ref_stores = bind_stores(graph, {"crm": pg_db, "out": ref_url})
    ref = run_reference(graph, tmp_path / "ref", prepare(tmp_path / "all", {"ev": files}), SINKS, ref_stores)
    spark_url = f"sqlite:///{tmp_path}/spark.sqlite3"
    stores = bind_stores(graph, {"crm": pg_db, "out": spark_url})
    sources = prepare(tmp_path / "spark-in", {"ev": files[:4]})
    options: dict[str, Any] = {"checkpoint": tmp_path / "ck", "stores": stores, "max_files": 2}
    deployment = run_deployment(spark, graph, tmp_path, sources, SINKS, **options)
    first = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", SINKS)
    assert first.dead, "the first files have failures already"
    # the table's and the sink's queries run their rows with the failures beside them, not the rows
    # before the split
    for name in ("cep:table:found", "cep:sink:enriched"):
        (query,) = [q for q in deployment.queries if q.name == name]
        assert SPLIT_EVENT in output_columns(query)
    prepare(tmp_path / "spark-in", {"ev": files[4:]})  # named after the first
    run_deployment(spark, graph, tmp_path, sources, SINKS, **options)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", SINKS)

    # three statements' worth of dead letters: each query writes its own ReadSQL's failures
    assert len(ref.dead) == 3 * 16 and {d["stage"] for d in ref.dead} == {"ReadSQL"}
    assert_same_dead_letters(ref, spk)
    assert_same(ref, spk, "enriched", min_rows=24, ordered=True)
    tables = _tables(spark_url)
    assert tables == _tables(ref_url)
    assert len(tables["found"]) == 24 and tables["latest"] == [("a", 35, 9), ("b", 36, 8)]


def output_columns(query: Any) -> str:
    """The columns of what `query`'s last micro-batch ran, as `StreamingQuery.explain` prints them:
    the line after the analyzed plan's heading."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        query.explain(extended=True)
    lines = out.getvalue().splitlines()
    return lines[lines.index("== Analyzed Logical Plan ==") + 1]
