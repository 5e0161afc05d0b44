"""Per-event error isolation: an event the database refuses (a constraint, a bad cast) is reported
and left out; every other event of the batch applies, in order, as if executed one by one."""

from __future__ import annotations

import random
import time

import pytest
from store_helpers import Backend, query

from operators.datatypes import T_INTEGER, DataType, schema_of
from operators.graph import Table
from stores import ledger
from stores.errors import StoreQueryError

ADD = query("UPDATE acc SET amount = amount + ? WHERE id = ?", name="add")


def _model(start: dict[int, int], events: list[tuple[int, int]]) -> tuple[dict[int, int], list[int]]:
    """Sequential semantics: each event sees the effects of the ones before it that succeeded."""
    bal = dict(start)
    failed = []
    for i, (d, k) in enumerate(events):
        if k in bal:
            if bal[k] + d < 0:
                failed.append(i)
            else:
                bal[k] += d
    return bal, failed


@pytest.mark.parametrize("ledgered", [False, True])
def test_state_dependent_failures_match_one_by_one_execution(sql_backend: Backend, ledgered: bool) -> None:
    # Whether an event overdraws depends on the events before it: the isolated batch must leave
    # out exactly the events a one-by-one execution would refuse.
    sql_backend.execute(
        "CREATE TABLE acc (id integer PRIMARY KEY, amount integer NOT NULL CHECK (amount >= 0))",
        "INSERT INTO acc VALUES " + ", ".join(f"({k}, 50)" for k in range(5)),
    )
    rng = random.Random(11)
    events = [(rng.choice([-30, -20, -5, 10, 25]), rng.randrange(6)) for _ in range(400)]
    want, failed = _model({k: 50 for k in range(5)}, events)
    assert 10 < len(failed) < 200  # the draw has failures, not only failures
    ids = (
        {"event_ids": [f"e{i}" for i in range(len(events))], "scope": ledger.scope("d", "n1")}
        if ledgered
        else {}
    )
    got = sql_backend.store.update(ADD, events, **ids)  # type: ignore[arg-type]
    assert got.failed == failed
    assert all(got.counts[i] is None for i in failed)
    assert [c for i, c in enumerate(got.counts) if i not in failed] == [
        1 if k < 5 else 0 for i, (_, k) in enumerate(events) if i not in failed
    ]
    assert dict(sql_backend.fetch("SELECT id, amount FROM acc")) == want  # type: ignore[arg-type]
    assert all("acc" in (got.errors[i] or "") or "check" in (got.errors[i] or "").lower() for i in failed)


def test_not_null_violation_is_isolated(sql_backend: Backend) -> None:
    sql_backend.execute("CREATE TABLE people (id integer PRIMARY KEY, name varchar(20) NOT NULL)")
    insert = query("INSERT INTO people (id, name) VALUES (?, ?)", name="hire")
    got = sql_backend.store.update(insert, [(1, "ann"), (2, None), (3, "bo"), (1, "dup")])
    assert got.counts == [1, None, 1, None]
    assert got.failed == [1, 3]
    assert "null" in (got.errors[1] or "").lower()
    assert got.errors[1] is not None and got.errors[1].startswith("store crm (") and "hire" in got.errors[1]
    assert sql_backend.fetch("SELECT id, name FROM people ORDER BY id") == [(1, "ann"), (3, "bo")]


@pytest.mark.postgres
def test_bad_cast_is_isolated(pg_backend: Backend) -> None:
    pg_backend.execute(
        "CREATE TABLE acc (id integer PRIMARY KEY, amount integer)", "INSERT INTO acc VALUES (1, 100)"
    )
    charge = query("UPDATE acc SET amount = amount - CAST(? AS integer) WHERE id = ?", name="charge")
    got = pg_backend.store.update(charge, [("5", 1), ("abc", 1), ("7", 1), ("99999999999", 1)])
    assert got.counts == [1, None, 1, None]
    assert 'invalid input syntax for type integer: "abc"' in (got.errors[1] or "")
    assert "out of range" in (got.errors[3] or "")
    assert pg_backend.fetch("SELECT amount FROM acc") == [(88,)]


@pytest.mark.postgres
def test_an_error_that_is_not_about_the_data_fails_the_whole_batch(pg_db: str) -> None:
    from stores.sql.store import SqlStore
    from stores.urls import parse_store_url

    store = SqlStore(parse_store_url(pg_db + "?statement_timeout_ms=300"), "crm")
    try:
        import psycopg

        with psycopg.connect(pg_db, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (k integer PRIMARY KEY, x integer)")
            conn.execute("INSERT INTO t VALUES (1, 0), (2, 0)")
        slow = query("UPDATE t SET x = ? WHERE k = ? AND pg_sleep(?) IS NOT NULL")
        with pytest.raises(StoreQueryError) as info:
            store.update(slow, [(1, 1, 0), (2, 2, 1), (3, 1, 0)])  # the second times out
        assert info.value.sqlstate == "57014"
        with psycopg.connect(pg_db) as conn:
            assert conn.execute("SELECT k, x FROM t ORDER BY k").fetchall() == [(1, 0), (2, 0)]
    finally:
        store.close()


def test_materialize_isolates_rows(sql_backend: Backend) -> None:
    t = Table(
        "bill",
        "crm",
        schema_of(("idcaller", T_INTEGER), ("plan", DataType("varchar", length=4))),
        ("idcaller",),
    )
    rows = [(1, "gold"), (None, "x"), (2, "bronze-too-long"), (3, "tin")]
    got = sql_backend.store.materialize(t, ["idcaller", "plan"], rows)
    if sql_backend.kind == "postgresql":
        assert got.failed == [1, 2]  # NULL key; value too long for varchar(4)
        assert "too long" in (got.errors[2] or "")
        assert sql_backend.fetch("SELECT idcaller, plan FROM bill ORDER BY 1") == [(1, "gold"), (3, "tin")]
    else:  # SQLite does not enforce varchar lengths
        assert got.failed == [1]
        assert len(sql_backend.fetch("SELECT * FROM bill")) == 3
    assert "null" in (got.errors[1] or "").lower()


@pytest.mark.postgres
def test_isolating_one_failure_in_a_large_batch_is_cheap(pg_backend: Backend) -> None:
    pg_backend.execute("CREATE TABLE people (id integer PRIMARY KEY, name text NOT NULL)")
    insert = query("INSERT INTO people (id, name) VALUES (?, ?)")
    rows = [(i, None if i == 3_217 else f"n{i}") for i in range(5_000)]
    start = time.perf_counter()
    got = pg_backend.store.update(insert, rows)
    elapsed = time.perf_counter() - start
    assert got.failed == [3_217]
    assert pg_backend.fetch("SELECT count(*) FROM people") == [(4_999,)]
    assert elapsed < 5, f"{elapsed:.2f} s"  # bisection: ~2·log2(5000) savepoint round trips, not 5000
