"""The effect ledger against real servers: a replayed UpdateSQL or Materialize batch takes effect once.

`sql_backend` runs each test on SQLite and on Postgres; the Redis tests use a real Redis.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
import redis
from store_helpers import Backend, query

from operators.datatypes import T_DOUBLE, T_INTEGER, T_STRING, schema_of
from operators.graph import Table
from stores import ledger
from stores.api import UpdateResult
from stores.redis.store import RedisStore, marker_key
from stores.sql import postgres_update as sql_pg
from stores.sql.store import SqlStore
from stores.urls import parse_store_url

CHARGE = query("UPDATE balances SET amount = amount - ? WHERE id = ?", name="charge")
BALANCES = (
    "CREATE TABLE balances (id integer PRIMARY KEY, amount integer NOT NULL CHECK (amount >= 0))",
    "INSERT INTO balances VALUES (1, 100), (2, 100), (3, 100)",
)
SCOPE = ledger.scope("billing", "n4")
LOG = Table("call_log", "crm", schema_of(("idcaller", T_INTEGER), ("cost", T_DOUBLE)))  # appends
BILL = Table("bill", "crm", schema_of(("idcaller", T_INTEGER), ("total", T_DOUBLE)), ("idcaller",))


def _amounts(b: Backend) -> list[tuple[object, ...]]:
    return b.fetch("SELECT id, amount FROM balances ORDER BY id")


# --------------------------------------------------------------------------------------------------
# UpdateSQL: per-event dedupe by event id


def test_a_replayed_update_batch_applies_once_and_returns_the_same_counts(sql_backend: Backend) -> None:
    sql_backend.execute(*BALANCES)
    params = [(10, 1), (5, 2), (1, 1), (7, 99), (2, 1)]
    ids = [f"e{i}" for i in range(len(params))]
    first = sql_backend.store.update(CHARGE, params, event_ids=ids, scope=SCOPE)
    assert first.counts == [1, 1, 1, 0, 1]
    assert first.replayed == 0
    assert _amounts(sql_backend) == [(1, 87), (2, 95), (3, 100)]

    again = sql_backend.store.update(CHARGE, params, event_ids=ids, scope=SCOPE)
    assert again.counts == first.counts and again.errors == first.errors
    assert again.replayed == len(params)
    assert _amounts(sql_backend) == [(1, 87), (2, 95), (3, 100)]  # not charged twice


def test_a_partly_replayed_batch_executes_only_the_new_events_in_order(sql_backend: Backend) -> None:
    sql_backend.execute(*BALANCES)
    sql_backend.store.update(CHARGE, [(10, 1), (20, 2)], event_ids=["a", "b"], scope=SCOPE)
    # A replay whose batch also holds new events (and one id twice: the same event, executed once).
    got = sql_backend.store.update(
        CHARGE, [(10, 1), (1, 3), (20, 2), (2, 3), (1, 3)], event_ids=["a", "c", "b", "d", "c"], scope=SCOPE
    )
    assert got.counts == [1, 1, 1, 1, 1]
    assert got.replayed == 3
    assert _amounts(sql_backend) == [(1, 90), (2, 80), (3, 97)]
    # Another operator (or deployment) has ledger entries of its own: the same ids apply there.
    other = sql_backend.store.update(CHARGE, [(10, 1)], event_ids=["a"], scope=ledger.scope("billing", "n9"))
    assert other.replayed == 0
    assert _amounts(sql_backend)[0] == (1, 80)


def test_a_replayed_event_the_ledger_sample_misses_is_still_skipped(sql_backend: Backend) -> None:
    # Postgres looks up a sample of a batch's keys before its fast path; an event recorded earlier
    # that the sample does not include must still execute only once (the ledger's key refuses it).
    sql_backend.execute(*BALANCES)
    ids = [f"e{i:02d}" for i in range(40)]
    assert "e01" not in sql_pg._sample(ids, sql_pg.SAMPLED_KEYS)
    assert sql_backend.store.update(CHARGE, [(1, 1)], event_ids=["e01"], scope=SCOPE).replayed == 0
    got = sql_backend.store.update(CHARGE, [(1, 1)] * len(ids), event_ids=ids, scope=SCOPE)
    assert got.replayed == 1 and got.counts == [1] * len(ids)
    assert _amounts(sql_backend)[0] == (1, 100 - len(ids))


def test_long_and_binary_event_ids(sql_backend: Backend) -> None:
    # Spark's ids hold file paths and NULs; long ones are stored as digests, all stay distinct.
    sql_backend.execute(*BALANCES)
    ids = [
        "file:///in/part-1.json\x0000000000000000000000\x00000000000001",
        "x" * 500,
        "x" * 499 + "y",
        "a%00",
    ]
    params = [(1, 1)] * len(ids)
    assert sql_backend.store.update(CHARGE, params, event_ids=ids, scope=SCOPE).replayed == 0
    assert sql_backend.store.update(CHARGE, params, event_ids=ids, scope=SCOPE).replayed == len(ids)
    assert _amounts(sql_backend)[0] == (1, 96)
    keys = {r[0] for r in sql_backend.fetch("SELECT key FROM cep_ledger")}
    assert len(keys) == len(ids) and all(len(str(k)) <= ledger.MAX_KEY + 8 for k in keys)


def test_event_ids_with_array_syntax_are_stored_verbatim(sql_backend: Backend) -> None:
    # Postgres receives the batch's keys as one array text (`{"...","..."}`): every character the
    # array syntax gives a meaning to must come back as it went in, and each id must stay one key.
    sql_backend.execute(*BALANCES)
    ids = ['a"b', "back\\slash", "\\", '"', "{x,y}", "a,b", " padded ", "", "NULL", "tab\tnew\nline", "ünï😀"]
    params = [(1, 1)] * len(ids)
    assert sql_backend.store.update(CHARGE, params, event_ids=ids, scope=SCOPE).counts == [1] * len(ids)
    again = sql_backend.store.update(CHARGE, params, event_ids=ids, scope=SCOPE)
    assert again.replayed == len(ids) and again.counts == [1] * len(ids)
    assert _amounts(sql_backend)[0] == (1, 100 - len(ids))
    assert {r[0] for r in sql_backend.fetch("SELECT key FROM cep_ledger")} == set(ids)


def test_a_failed_event_is_recorded_and_replayed_as_failed(sql_backend: Backend) -> None:
    sql_backend.execute(*BALANCES)
    params = [(30, 1), (500, 2), (30, 1)]  # the second overdraws: CHECK (amount >= 0)
    first = sql_backend.store.update(CHARGE, params, event_ids=["a", "b", "c"], scope=SCOPE)
    assert first.counts == [1, None, 1]
    assert first.failed == [1] and "check" in (first.errors[1] or "").lower()
    assert _amounts(sql_backend) == [(1, 40), (2, 100), (3, 100)]
    sql_backend.execute("UPDATE balances SET amount = 1000 WHERE id = 2")  # it would succeed now...
    again = sql_backend.store.update(CHARGE, params, event_ids=["a", "b", "c"], scope=SCOPE)
    assert again.errors == first.errors and again.counts == first.counts  # ...but it is not redone
    assert _amounts(sql_backend) == [(1, 40), (2, 1000), (3, 100)]


def test_a_batch_where_every_event_fails(sql_backend: Backend) -> None:
    sql_backend.execute(*BALANCES)
    got = sql_backend.store.update(CHARGE, [(500, 1), (500, 2)], event_ids=["a", "b"], scope=SCOPE)
    assert got.counts == [None, None] and got.failed == [0, 1]
    again = sql_backend.store.update(CHARGE, [(500, 1), (500, 2)], event_ids=["a", "b"], scope=SCOPE)
    assert again.errors == got.errors and again.replayed == 2
    assert _amounts(sql_backend) == [(1, 100), (2, 100), (3, 100)]


def test_update_ids_and_scope_are_checked(sql_backend: Backend) -> None:
    from stores.errors import StoreQueryError

    with pytest.raises(StoreQueryError, match="go together"):
        sql_backend.store.update(CHARGE, [(1, 1)], event_ids=["a"])
    with pytest.raises(StoreQueryError, match="1 event ids for 2 events"):
        sql_backend.store.update(CHARGE, [(1, 1), (1, 2)], event_ids=["a"], scope=SCOPE)
    with pytest.raises(StoreQueryError, match="is not 'deployment/operator'"):
        sql_backend.store.update(CHARGE, [(1, 1)], event_ids=["a"], scope="no-operator")
    with pytest.raises(StoreQueryError, match="longer than 200"):
        sql_backend.store.update(CHARGE, [(1, 1)], event_ids=["a"], scope=ledger.scope("d" * 201, "n1"))
    with pytest.raises(StoreQueryError, match="needs a deployment"):
        sql_backend.store.materialize(LOG, ["idcaller", "cost"], [(1, 1.0)], ledger_key=("", "n1", 0))


@pytest.mark.postgres
def test_two_concurrent_replays_of_one_batch_apply_once(pg_db: str) -> None:
    # Spark recomputes an UpdateSQL in every query downstream of it, at the same time: the second
    # transaction waits on the ledger's key, then finds the events taken and executes nothing.
    url = parse_store_url(pg_db)
    with psycopg.connect(pg_db, autocommit=True) as conn:
        for statement in BALANCES:
            conn.execute(statement)
    stores = [SqlStore(url, "crm"), SqlStore(url, "crm")]
    params = [(1, 1 + i % 3) for i in range(300)]
    ids = [f"e{i}" for i in range(300)]
    results: list[object] = [None, None]
    start = threading.Barrier(2)

    def run(k: int) -> None:
        start.wait()
        results[k] = stores[k].update(CHARGE, params, event_ids=ids, scope=SCOPE)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for store in stores:
        store.close()
    a, b = results
    assert isinstance(a, UpdateResult) and isinstance(b, UpdateResult)
    assert a.counts == b.counts == [1] * 300
    assert sorted([a.replayed, b.replayed]) == [0, 300]
    with psycopg.connect(pg_db) as conn:
        assert conn.execute("SELECT id, amount FROM balances ORDER BY id").fetchall() == [
            (1, 0),
            (2, 0),
            (3, 0),
        ]


# --------------------------------------------------------------------------------------------------
# Materialize: per-batch dedupe by (deployment, operator, batch id)


def test_a_replayed_materialize_batch_writes_nothing_twice(sql_backend: Backend) -> None:
    store = sql_backend.store
    rows = [(1, 2.0), (1, 2.0), (2, 3.5)]
    first = store.materialize(LOG, ["idcaller", "cost"], rows, ledger_key=("billing", "n7", 0))
    assert first.errors == [None] * 3 and not first.replayed
    again = store.materialize(LOG, ["idcaller", "cost"], rows, ledger_key=("billing", "n7", 0))
    assert again.replayed and again.errors == [None] * 3
    assert sql_backend.fetch("SELECT count(*) FROM call_log") == [(3,)]
    # The next batch, and the same batch id of another deployment, are written.
    store.materialize(LOG, ["idcaller", "cost"], [(3, 1.0)], ledger_key=("billing", "n7", 1))
    store.materialize(LOG, ["idcaller", "cost"], [(4, 1.0)], ledger_key=("other", "n7", 0))
    assert sql_backend.fetch("SELECT count(*) FROM call_log") == [(5,)]
    assert sql_backend.fetch(
        "SELECT key, affected FROM cep_ledger WHERE deployment = 'billing' ORDER BY key"
    ) == [
        ("batch:0", 3),
        ("batch:1", 1),
    ]


def test_a_replayed_batch_with_a_failed_row_reports_it_again(sql_backend: Backend) -> None:
    rows = [(1, 1.0), (None, 2.0), (3, 3.0)]  # a NULL primary key
    first = sql_backend.store.materialize(BILL, ["idcaller", "total"], rows, ledger_key=("billing", "n8", 5))
    assert first.failed == [1]
    assert "null" in (first.errors[1] or "").lower()
    again = sql_backend.store.materialize(BILL, ["idcaller", "total"], rows, ledger_key=("billing", "n8", 5))
    assert again.replayed and again.errors == first.errors
    assert sql_backend.fetch("SELECT idcaller, total FROM bill ORDER BY idcaller") == [(1, 1.0), (3, 3.0)]


def test_without_a_ledger_key_a_batch_is_simply_written(sql_backend: Backend) -> None:
    for _ in range(2):
        sql_backend.store.materialize(LOG, ["idcaller", "cost"], [(1, 1.0)])
    assert sql_backend.fetch("SELECT count(*) FROM call_log") == [(2,)]


# --------------------------------------------------------------------------------------------------
# Redis


@pytest.fixture
def redis_store(redis_db: str) -> Iterator[tuple[RedisStore, redis.Redis]]:
    s = RedisStore(parse_store_url(redis_db), "cache")
    with redis.Redis.from_url(redis_db, decode_responses=True) as r:
        yield s, r
    s.close()


@pytest.mark.redis
def test_redis_replayed_batch_writes_nothing_twice(redis_store: tuple[RedisStore, redis.Redis]) -> None:
    store, r = redis_store
    log = Table("call_log", "cache", schema_of(("idcaller", T_INTEGER), ("note", T_STRING)), ttl_ms=60_000)
    rows = [(1, "a"), (2, "b")]
    first = store.materialize(log, ["idcaller", "note"], rows, ledger_key=("billing", "n3", 7))
    again = store.materialize(log, ["idcaller", "note"], rows, ledger_key=("billing", "n3", 7))
    assert not first.replayed and again.replayed
    assert sorted(r.keys("call_log*")) == ["call_log", "call_log:1", "call_log:2"]  # appended once
    marker = marker_key(("billing", "n3", 7))
    assert r.exists(marker)
    assert 0 < r.pttl("call_log:1") <= 60_000  # the table's TTL on the rows
    assert r.pttl(marker) > 86_400_000  # the marker outlives a short table TTL

    # An upsert batch with a NULL key: that row fails, is recorded, and is reported again on replay.
    bill = Table("bill", "cache", schema_of(("idcaller", T_INTEGER), ("total", T_DOUBLE)), ("idcaller",))
    rows2 = [(1, 1.0), (None, 2.0)]
    got = store.materialize(bill, ["idcaller", "total"], rows2, ledger_key=("billing", "n4", 0))
    assert got.failed == [1]
    r.hset("bill:1", "total", "99")  # changed since: a replay must not overwrite it
    replay = store.materialize(bill, ["idcaller", "total"], rows2, ledger_key=("billing", "n4", 0))
    assert replay.replayed and replay.errors == got.errors
    assert r.hget("bill:1", "total") == "99"


def test_redis_marker_keys_cannot_collide() -> None:
    assert marker_key(("a:b", "c", 1)) != marker_key(("a", "b:c", 1))
    assert marker_key(("a", "n1", 12)) == "cep:ledger:a:n1:12"
