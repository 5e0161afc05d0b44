"""ON SQL result types on both engines (issue 21): the types the store describes, RETURNS, and values
that do not fit them, against SQLite (the embedded default) and a real PostgreSQL.

A result value becomes a value of its field's type by one rule (operators.results), or its event is
dead-lettered, whole, with the same reason on both engines; the query never fails for one value.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from spark_helpers import assert_same, assert_same_dead_letters, compile_text, run_both

from deployer.runner import bind_stores
from operators import graph as g
from operators.declarations import DataStore
from stores.bindings import resolve_bindings

pytestmark = pytest.mark.spark


def crm_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """The embedded SQLite store `crm` (the default binding) under tmp_path, made by `script`."""
    data = tmp_path / "data"
    data.mkdir()
    db = sqlite3.connect(data / "crm.sqlite3")
    db.executescript(script)
    db.commit()
    db.close()
    monkeypatch.setenv("CEP_DATA_DIR", str(data))


UNTYPED = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan FROM plans WHERE idcaller = ?';
INSERT INTO withplan SELECT k, p.idplan AS idplan FROM calls ON SQL plan_of, p, idcaller, idplan;
"""


def test_an_untyped_integer_result_no_longer_stops_the_spark_query(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a SELECT without RETURNS compiled without its store (its results varchar) over an
    integer column stopped the Spark query (`ArrowTypeError: Expected bytes, got a 'int' object`)
    while the local engine read text. Both now read the text of the value."""
    crm_db(
        tmp_path,
        monkeypatch,
        "CREATE TABLE plans (idcaller integer, idplan integer); INSERT INTO plans VALUES (1, 10), (2, 20);",
    )
    events = [{"k": i, "idcaller": c} for i, c in enumerate([1, 2, 3, 1])]
    config = bind_stores(compile_text(UNTYPED), {})
    ref, spk = run_both(spark, tmp_path, UNTYPED, {"calls": [events]}, ["withplan"], stores=config)
    assert_same(ref, spk, "withplan", min_rows=3)
    assert sorted((r["k"], r["idplan"]) for r in spk["withplan"]) == [(0, "10"), (1, "20"), (3, "10")]
    assert spk.dead == []


DESCRIBED = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS
  'SELECT idplan, fee, note, since, active, amount, big FROM plans WHERE idcaller = ? ORDER BY idplan';
INSERT INTO withplan SELECT k, p.idplan + 1 AS nextplan, p.fee * 2 AS fee2, p.note, p.since, p.active,
  p.amount, p.big FROM calls ON SQL plan_of, p, idcaller, idplan, fee, note, since, active, amount, big;
"""

SQLITE_PLANS = """
CREATE TABLE plans (idcaller integer, idplan INTEGER, fee REAL, note TEXT, since DATETIME, active BOOLEAN,
  amount NUMERIC(6, 2), big BIGINT);
INSERT INTO plans VALUES
  (1, 10, 2.5, 'gold', '2026-01-01 10:00:00.000000', 1, 3.25, 5000000000),
  (2, 20, 1.0, 'ok', NULL, 0, 1, 1),
  (2, 'abc', 1.0, 'second row', NULL, 0, 1, 1),
  (3, 3000000000, NULL, NULL, NULL, NULL, NULL, NULL),
  (4, 2.5, NULL, NULL, NULL, NULL, NULL, NULL),
  (5, 50, NULL, NULL, NULL, 7, NULL, NULL),
  (6, 60, NULL, NULL, 'soon', NULL, NULL, NULL),
  (7, 70, NULL, NULL, NULL, NULL, 12345.678, NULL),
  (8, 'abc', 'x', NULL, NULL, NULL, NULL, NULL),
  (9, 90, NULL, 42, NULL, NULL, NULL, NULL),
  (9, 91, NULL, x'0102', NULL, NULL, NULL, NULL),
  (10, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
"""


def test_sqlite_described_types_and_values_that_do_not_fit(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without RETURNS the types come from the SQLite columns' declared types (arithmetic on them
    compiles); SQLite keeps any value in any column, and an event with a value that does not fit
    its column is dead-lettered whole (caller 2's good first row goes nowhere either), with the
    reason of its first such value, identically on both engines."""
    crm_db(tmp_path, monkeypatch, SQLITE_PLANS)
    events = [{"k": i, "idcaller": c} for i, c in enumerate([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, None])]
    config = bind_stores(compile_text(UNTYPED), {})
    graph = compile_text(DESCRIBED, config)
    read = next(n for n in graph.nodes if isinstance(n, g.ReadSQL))
    assert [str(f.type) for f in read.result_fields] == [
        "integer", "double", "varchar", "timestamp", "boolean", "decimal(6, 2)", "bigint",
    ]  # fmt: skip
    ref, spk = run_both(
        spark, tmp_path, DESCRIBED, {"calls": [events]}, ["withplan"], stores=config, describe=True
    )
    assert_same(ref, spk, "withplan", min_rows=4)
    assert_same_dead_letters(ref, spk)
    rows = sorted(spk["withplan"], key=lambda r: (r["k"], r["nextplan"] or 0))
    assert rows[0] == {
        "k": 0, "nextplan": 11, "fee2": 5.0, "note": "gold", "since": "2026-01-01T10:00:00Z",
        "active": True, "amount": "3.25", "big": 5000000000,
    }  # fmt: skip
    assert [(r["k"], r["note"]) for r in rows[1:]] == [(8, "42"), (8, "\\x0102"), (9, None)]
    reasons = sorted((d["event"][1], d["reason"], d["stage"]) for d in spk.dead)
    assert reasons == [
        (2, "query plan_of, column 'idplan': 'abc' is not an integer", "ReadSQL"),
        (3, "query plan_of, column 'idplan': 3000000000 is out of range for integer", "ReadSQL"),
        (4, "query plan_of, column 'idplan': 2.5 is not an integer", "ReadSQL"),
        (5, "query plan_of, column 'active': 7 is not a boolean", "ReadSQL"),
        (6, "query plan_of, column 'since': 'soon' is not a timestamp", "ReadSQL"),
        (7, "query plan_of, column 'amount': 12345.678 is out of range for decimal(6, 2)", "ReadSQL"),
        (8, "query plan_of, column 'idplan': 'abc' is not an integer", "ReadSQL"),
    ]
    assert all(len(d["event"]) == 2 and d["line"] == 6 and d["node"] == read.id for d in spk.dead)


RETURNS = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer, note varchar;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan, label FROM plans WHERE idcaller = ?'
  RETURNS (idplan integer, label varchar(4));
INSERT INTO withplan SELECT k, p.idplan, p.label FROM calls ON OUTER SQL plan_of, p, idcaller, idplan, label;
"""


def test_returns_with_values_that_do_not_fit_is_dead_lettered_on_both_engines(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RETURNS is the user's declaration and wins over the store's types; a value that does not fit
    it stopped the Spark query (ArrowInvalid) where the reference dead-lettered the event (with
    CAST's words and truncating a long text): both now dead-letter it with the same reason, and the
    dead letter keeps the whole event, fields no consumer reads included."""
    crm_db(
        tmp_path,
        monkeypatch,
        "CREATE TABLE plans (idcaller integer, idplan text, label text);"
        "INSERT INTO plans VALUES (1, '10', 'gold'), (2, 'abc', 'x'), (3, '30', 'too long'), (4, ' 40 ', NULL);",
    )
    events = [{"k": i, "idcaller": c, "note": f"n{i}"} for i, c in enumerate([1, 2, 3, 4, 5])]
    config = bind_stores(compile_text(RETURNS), {})
    ref, spk = run_both(
        spark, tmp_path, RETURNS, {"calls": [events]}, ["withplan"], stores=config, describe=True
    )
    assert_same(ref, spk, "withplan", min_rows=3)
    assert_same_dead_letters(ref, spk)
    got = sorted((r["k"], r["idplan"], r["label"]) for r in spk["withplan"])
    assert got == [(0, 10, "gold"), (3, 40, None), (4, None, None)]
    assert sorted((d["event"], d["reason"]) for d in spk.dead) == [
        ([1, 2, "n1"], "query plan_of, column 'idplan': 'abc' is not an integer"),
        ([2, 3, "n2"], "query plan_of, column 'label': 'too long' is longer than 4 characters"),
    ]


PG_DESCRIBED = """
CREATE STREAMSCHEMA calls WITH k integer, idcaller integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS
  'SELECT idplan, big, fee, amount, free, note, code, active, since, day, id, doc FROM plans WHERE idcaller = ?';
CREATE SQLQUERY narrow ON crm AS 'SELECT big, note FROM plans WHERE idcaller = ?' RETURNS (big integer, note integer);
INSERT INTO withplan SELECT k, p.idplan * 2 AS twice, p.big, p.fee, p.amount, p.free, p.note, p.code, p.active,
  p.since, p.day, p.id, p.doc FROM calls
  ON SQL plan_of, p, idcaller, idplan, big, fee, amount, free, note, code, active, since, day, id, doc;
INSERT INTO narrowed SELECT k, q.big, q.note FROM calls ON SQL narrow, q, idcaller, big, note;
"""

PG_PLANS = """
CREATE TABLE plans (idcaller int4, idplan int4, big int8, fee float8, amount numeric(10, 2), free numeric,
  note text, code char(3), active bool, since timestamptz, day date, id uuid, doc jsonb);
INSERT INTO plans VALUES
  (1, 10, 5000000000, 2.5, 3.25, 1.125, 'gold', 'ab', true, '2026-01-01 10:00:00+02', '2026-01-02',
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}'),
  (2, 20, 7, NULL, 'NaN', NULL, '42', NULL, NULL, NULL, NULL, NULL, NULL),
  (3, 30, NULL, NULL, NULL, 1e25, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
"""


@pytest.mark.postgres
def test_postgres_described_types_and_values_that_do_not_fit(spark: Any, tmp_path: Path, pg_db: str) -> None:
    """PostgreSQL describes the prepared query: int4 → integer (p.idplan * 2 compiles), int8 →
    bigint, float8 → double, numeric(10, 2) → decimal(10, 2), numeric → decimal(38, 18), text and
    char → varchar, bool, timestamptz and date → timestamp, uuid and jsonb → varchar (their text).
    A numeric NaN, a numeric beyond decimal(38, 18) and a RETURNS that does not fit the data
    dead-letter their events on both engines with the same reasons."""
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute(PG_PLANS)
    config = resolve_bindings({"crm": DataStore("crm", "postgresql")}, {"crm": pg_db}, {}, tmp_path)
    events = [{"k": i, "idcaller": c} for i, c in enumerate([1, 2, 3, 4, 5])]
    ref, spk = run_both(
        spark,
        tmp_path,
        PG_DESCRIBED,
        {"calls": [events]},
        ["withplan", "narrowed"],
        stores=config,
        describe=True,
    )
    assert_same(ref, spk, "withplan", min_rows=2)
    assert_same(ref, spk, "narrowed", min_rows=1)
    assert_same_dead_letters(ref, spk)
    rows = sorted(spk["withplan"], key=lambda r: r["k"])
    assert rows[0] == {
        "k": 0, "twice": 20, "big": 5000000000, "fee": 2.5, "amount": "3.25", "free": "1.125000000000000000",
        "note": "gold", "code": "ab ", "active": True, "since": "2026-01-01T08:00:00Z",
        "day": "2026-01-02T00:00:00Z", "id": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "doc": '{"a": [1, 2]}',
    }  # fmt: skip
    assert [r["k"] for r in rows] == [0, 3]
    assert sorted((d["event"][0], d["reason"]) for d in spk.dead) == [
        (0, "query narrow, column 'big': 5000000000 is out of range for integer"),
        (1, "query plan_of, column 'amount': NaN is not a decimal number"),
        (2, "query plan_of, column 'free': 10000000000000000000000000 is out of range for decimal(38, 18)"),
    ]
    # RETURNS (note integer) reads the text '42' as the integer 42, as an input record would
    got = sorted((r["k"], r["big"], r["note"]) for r in spk["narrowed"])
    assert got == [(1, 7, 42), (2, None, None), (3, None, None)]
