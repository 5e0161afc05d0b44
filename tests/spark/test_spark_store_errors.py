"""Data store errors on both engines (docs/guarantees.md, "Data store errors"): one classification,
the stores' (stores/errors.py `about_event`), followed alike by the reference executor and Spark.

- An error about one event's data (a division by zero or a bad cast in the query for that event's
  parameters) dead-letters that event, with the same reason, and the run goes on.
- A query whose rows have another number of columns than ON SQL names (possible only when the store
  did not describe it) dead-letters each event that has rows, with the same reason.
- An error that is not about one event (a missing table, a table that is not as declared, a result
  column whose type changed since the script was compiled) stops the run with the same text; on
  Spark the unfinished batch stays in the checkpoint, and a run after the cause is fixed resumes it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from spark_helpers import (
    assert_same,
    assert_same_dead_letters,
    compile_text,
    prepare,
    run_both,
    run_reference,
    run_spark,
)

from deployer.engine import one_line
from deployer.runner import bind_stores
from deployer.spark.run.checkpoint import query_dir
from deployer.spark.run.progress import QueryFailed
from operators.declarations import DataStore
from stores.bindings import resolve_bindings
from stores.errors import StoreError

pytestmark = pytest.mark.spark

KINDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def crm(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest | None = None
) -> tuple[str, Callable[[str], None]]:
    """The URL of a fresh `crm` store of `kind`, and a function that runs SQL in it."""
    if kind == "postgresql":
        assert request is not None
        url = str(request.getfixturevalue("pg_db"))

        def execute(sql: str) -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql)

        return url, execute
    db = tmp_path / "crm.sqlite3"

    def execute_sqlite(sql: str) -> None:
        conn = sqlite3.connect(db)
        try:
            conn.executescript(sql)
            conn.commit()
        finally:
            conn.close()

    execute_sqlite("")  # the file exists: a store that is there, with no tables yet
    return f"sqlite:///{db}", execute_sqlite


PLANS = (
    "CREATE TABLE plans (idcaller integer, idplan integer, fee double precision);"
    "INSERT INTO plans VALUES (1, 10, 2.5), (2, 20, 1.0), (2, 21, 3.0), (4, 40, 4.0);"
)

WIDTHS = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY one_col ON crm AS 'SELECT idplan FROM plans WHERE idcaller = ?';
CREATE SQLQUERY three_cols ON crm AS 'SELECT idplan, fee, idcaller FROM plans WHERE idcaller = ?';
INSERT INTO short SELECT k, p.idplan, p.fee FROM calls ON SQL one_col, p, idcaller, idplan, fee;
INSERT INTO long SELECT k, q.idplan FROM calls ON OUTER SQL three_cols, q, idcaller, idplan, fee;
"""


@pytest.mark.parametrize("kind", KINDS)
def test_rows_of_another_width_than_on_sql_names_dead_letter_their_events_on_both_engines(
    spark: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    """Compiled without its store (not described: nothing checked the column count), one query
    returns 1 column for 2 names, the other 3 for 2. Spark filled the missing column with NULLs and
    dropped the extra one; both engines now dead-letter each event that has rows, with the reason
    naming the query and both counts. An event without rows has nothing to refuse: OUTER still
    emits it with NULLs."""
    url, execute = crm(kind, tmp_path, request)
    execute(PLANS)
    config = bind_stores(compile_text(WIDTHS), {"crm": url})
    events = [{"k": i, "idcaller": c} for i, c in enumerate([1, 2, 3, None, 4])]
    ref, spk = run_both(spark, tmp_path, WIDTHS, {"calls": [events]}, ["short", "long"], stores=config)
    assert_same(ref, spk, "long", min_rows=2)
    assert sorted((r["k"], r["idplan"]) for r in spk["long"]) == [(2, None), (3, None)]
    assert ref["short"] == spk["short"] == []
    assert_same_dead_letters(ref, spk)
    one = "query 'one_col' returned 1 column(s) but ON SQL names 2"
    three = "query 'three_cols' returned 3 column(s) but ON SQL names 2"
    got = sorted((d["event"][0], d["stage"], d["reason"]) for d in spk.dead)
    assert got == sorted((k, "ReadSQL", why) for k in (0, 1, 4) for why in (one, three))


SHARE = """
CREATE STREAMSCHEMA calls WITH k integer, d integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY share ON crm AS 'SELECT 100 / ? AS v' RETURNS (v integer);
INSERT INTO shares SELECT k, s.v FROM calls ON SQL share, s, d, v;
"""


@pytest.mark.postgres
def test_an_event_whose_read_the_database_refuses_is_dead_lettered_on_both_engines(
    spark: Any, tmp_path: Path, pg_db: str
) -> None:
    """`100 / ?` is a division by zero (SQLSTATE 22012, a data exception: the event's own data)
    for the events with d = 0. The reference executor, which reads event by event, dead-lettered
    them; Spark's batched read failed whole and stopped the query. Spark's read now splits the
    batch around them (stores.api.split_reads): the same dead letters, the same reason."""
    config = bind_stores(compile_text(SHARE), {"crm": pg_db})
    events = [{"k": i, "d": d} for i, d in enumerate([4, 0, 5, None, 0, 10, 20, 25, 50])]
    ref, spk = run_both(
        spark, tmp_path, SHARE, {"calls": [events[:4], events[4:]]}, ["shares"], stores=config
    )
    assert_same(ref, spk, "shares", min_rows=7)
    assert_same_dead_letters(ref, spk)
    assert sorted(r["v"] for r in spk["shares"] if r["v"] is not None) == [2, 4, 5, 10, 20, 25]
    assert sorted(d["event"][0] for d in spk.dead) == [1, 4]
    assert {d["reason"] for d in spk.dead} == {
        f"store crm ({config.urls['crm'].redacted()}): query share: division by zero"
    }


PLAN = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer;
CREATE DATASTORE crm TYPE sqlite;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan FROM plans WHERE idcaller = ?' RETURNS (idplan integer);
INSERT INTO withplan SELECT k, p.idplan FROM calls ON SQL plan_of, p, idcaller, idplan;
"""


def test_a_missing_table_stops_both_engines_and_spark_resumes_once_it_exists(
    spark: Any, tmp_path: Path
) -> None:
    """No event is at fault when the table is missing: the local engine dead-lettered every event
    (a run that empties its input into its dead letters), Spark stopped. Both stop now, with the
    store's error, the same text; Spark's unfinished batch stays in its checkpoint (offsets logged,
    no commit), and the run after the table is created replays it: every event comes through."""
    url, execute = crm("sqlite", tmp_path)
    graph = compile_text(PLAN)
    config = bind_stores(graph, {"crm": url})
    events = [{"k": i, "idcaller": 1 + i % 3} for i in range(9)]
    sources = prepare(tmp_path, {"calls": [events[:3], events[3:6], events[6:]]})
    with pytest.raises(StoreError) as ref_err:
        run_reference(graph, tmp_path / "ref1", sources, ["withplan"], config)
    checkpoint = tmp_path / "ck"
    with pytest.raises(QueryFailed) as spk_err:
        run_spark(
            spark, graph, tmp_path, sources, ["withplan"], checkpoint=checkpoint, max_files=1, stores=config
        )
    want = f"store crm ({url}): query plan_of: no such table: plans"
    assert str(ref_err.value) == want
    assert f": {want}; its unfinished batch is kept in the checkpoint" in str(spk_err.value)
    sink = checkpoint / query_dir("sink:withplan")
    assert (sink / "offsets" / "0").is_file() and not (sink / "commits" / "0").exists()

    execute(PLANS.replace("(4, 40, 4.0)", "(3, 30, 0.5)"))
    ref = run_reference(graph, tmp_path / "ref2", sources, ["withplan"], config)
    spk = run_spark(
        spark, graph, tmp_path, sources, ["withplan"], checkpoint=checkpoint, max_files=1, stores=config
    )
    assert_same(ref, spk, "withplan", min_rows=12)  # caller 2 has two plans
    assert sorted({r["k"] for r in spk["withplan"]}) == list(range(9))
    assert ref.dead == spk.dead == []


EFFECTS = {
    # an UpdateSQL whose table is missing
    "UpdateSQL": (
        "CREATE SQLQUERY charge ON crm AS 'UPDATE balances SET amount = amount - ? WHERE idcaller = ?';"
        "INSERT INTO charged SELECT k, c.n FROM calls ON SQL charge, c, k, idcaller, n;",
        "charged",
        "query charge: no such table: balances",
    ),
    # a trigger's RAISE(ROLLBACK) ends the whole transaction: the store cannot leave one event out
    "UpdateSQL, rolled back": (
        "CREATE SQLQUERY charge ON crm AS 'UPDATE accounts SET amount = amount - ? WHERE idcaller = ?';"
        "INSERT INTO charged SELECT k, c.n FROM calls ON SQL charge, c, k, idcaller, n;",
        "charged",
        "query charge: no overdraft",
    ),
    # a Materialize into a table that exists with other columns
    "Materialize": (
        "CREATE TABLE seen (k integer PRIMARY KEY, idcaller integer) IN crm;"
        "INSERT INTO TABLE seen SELECT k, idcaller FROM calls;",
        None,
        "table seen already exists with a different definition and is never altered:\n"
        "  existing: (k integer, note text) PRIMARY KEY (k)\n",
    ),
}


@pytest.mark.parametrize("stage", sorted(EFFECTS))
def test_updates_and_tables_stop_both_engines_alike(spark: Any, tmp_path: Path, stage: str) -> None:
    """The same classification for UpdateSQL and Materialize: the local engine dead-lettered every
    event for a store error that no event caused; both engines stop now, with the same message."""
    url, execute = crm("sqlite", tmp_path)
    execute(
        "CREATE TABLE seen (k integer PRIMARY KEY, note text);"
        "CREATE TABLE accounts (idcaller integer PRIMARY KEY, amount integer);"
        "INSERT INTO accounts VALUES (0, 10), (1, 10), (2, 10), (3, 10);"
        "CREATE TRIGGER no_overdraft BEFORE UPDATE ON accounts WHEN NEW.amount < 9"
        " BEGIN SELECT RAISE(ROLLBACK, 'no overdraft'); END;"
    )
    statements, sink, message = EFFECTS[stage]
    script = PLAN[: PLAN.index("CREATE SQLQUERY")] + statements
    graph = compile_text(script)
    config = bind_stores(graph, {"crm": url})
    sources = prepare(tmp_path, {"calls": [[{"k": i, "idcaller": i} for i in range(4)]]})
    sinks = [sink] if sink else []
    with pytest.raises(StoreError) as ref_err:
        run_reference(graph, tmp_path, sources, sinks, config)
    with pytest.raises(QueryFailed) as spk_err:
        run_spark(spark, graph, tmp_path, sources, sinks, stores=config)
    want = f"store crm ({url}): {message}"
    assert str(ref_err.value).startswith(want)
    # both stop with the store's message, in one line (deployer.engine.one_line)
    assert f": {one_line(str(ref_err.value))}" in str(spk_err.value)


CHANGED = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan FROM plans WHERE idcaller = ?';
INSERT INTO withplan SELECT k, p.idplan + 1 AS next FROM calls ON SQL plan_of, p, idcaller, idplan;
"""


@pytest.mark.postgres
def test_a_column_whose_type_changed_since_compiling_stops_both_engines(
    spark: Any, tmp_path: Path, pg_db: str
) -> None:
    """PostgreSQL described idplan as int4, so the script reads it as an integer and neither engine
    checks its values one by one. Then the column becomes text and one plan 'abc': no event is at
    fault, and every later value of the column may be wrong alike. The local engine dead-lettered
    the events that met it, Spark stopped; both stop now, saying to compile the script again."""
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE plans (idcaller int4, idplan int4)")
        conn.execute("INSERT INTO plans VALUES (1, 10), (2, 20), (3, 30)")
    config = resolve_bindings({"crm": DataStore("crm", "postgresql")}, {"crm": pg_db}, {}, tmp_path)
    graph = compile_text(CHANGED, config)  # p.idplan + 1 compiles: idplan is an integer (int4)
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("ALTER TABLE plans ALTER COLUMN idplan TYPE text")
        conn.execute("UPDATE plans SET idplan = 'abc' WHERE idcaller = 2")
    events = [{"k": i, "idcaller": 1 + i % 3} for i in range(6)]
    sources = prepare(tmp_path, {"calls": [events]})
    with pytest.raises(StoreError) as ref_err:
        run_reference(graph, tmp_path, sources, ["withplan"], config)
    with pytest.raises(QueryFailed) as spk_err:
        run_spark(spark, graph, tmp_path, sources, ["withplan"], stores=config)
    want = (
        "store crm: query plan_of, column 'idplan': 'abc' is not an integer, but the data store described "
        "that column as int4 when the script was compiled: its type has changed since. Compile and run "
        "the script again"
    )
    assert str(ref_err.value) == want
    assert f": {want}" in str(spk_err.value)
