"""A data store that is down: bounded retries with backoff, then a clear, redacted StoreConnectError;
a store that comes back in time is used again; SQL errors and rejected logins are never retried."""

from __future__ import annotations

import logging
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from store_helpers import FAST_RETRY, TcpProxy, query

from operators.datatypes import T_DOUBLE, T_INTEGER, schema_of
from operators.graph import DataStore, Table
from stores import ledger
from stores.bindings import StoreBindings
from stores.errors import StoreConnectError, StoreError, StoreQueryError
from stores.redis.store import RedisStore
from stores.registry import StoreRegistry
from stores.retry import RetryPolicy, call_with_retries
from stores.sql.store import SqlStore
from stores.urls import parse_store_url

SECRET = "S3cret-pw_retry"
BILL = Table("bill", "cache", schema_of(("idcaller", T_INTEGER), ("total", T_DOUBLE)), ("idcaller",))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _shown(e: BaseException) -> str:
    return "".join(traceback.format_exception(e)) + repr(e)


def _through(url: str, proxy: TcpProxy) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{proxy.port}"))


# --------------------------------------------------------------------------------------------------
# Giving up


@pytest.mark.parametrize("kind", ["postgresql", "redis"])
def test_a_closed_port_fails_after_the_retries_with_a_redacted_message(kind: str) -> None:
    retry = RetryPolicy(tries=3, base_s=0.05)  # the registry gives its stores the bindings' policy
    port = _free_port()
    call: Callable[[], object]
    if kind == "postgresql":
        url = parse_store_url(f"postgresql://alice:{SECRET}@127.0.0.1:{port}/db")
        reg = StoreRegistry(StoreBindings({"crm": url}, {"crm": DataStore("crm", "postgresql")}, retry))
        call = lambda: reg.read(query("SELECT 1 WHERE 1 = ?"), [(1,)])  # noqa: E731
        prefix = "store crm (postgresql://alice:***@127.0.0.1:"
    else:
        url = parse_store_url(f"redis://:{SECRET}@127.0.0.1:{port}/0")
        reg = StoreRegistry(StoreBindings({"cache": url}, {"cache": DataStore("cache", "redis")}, retry))
        call = lambda: reg.materialize(BILL, ["idcaller", "total"], [(1, 1.0)])  # noqa: E731
        prefix = "store cache (redis://:***@127.0.0.1:"
    start = time.monotonic()
    with pytest.raises(StoreConnectError) as info:
        call()
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert message.startswith(prefix)
    assert "refused" in message.lower()
    assert "after 3 attempts" in message and "CEP_STORE_RETRIES" in message
    assert SECRET not in _shown(info.value)
    assert 0.05 * (1 + 2) * 0.8 <= elapsed < 5  # two waits: ~50 ms, ~100 ms
    reg.close()


@pytest.mark.postgres
def test_a_login_the_server_rejects_is_not_retried(pg_db: str) -> None:
    retry = RetryPolicy(base_s=1.0)  # a retry would show in the time taken
    parts = urlsplit(pg_db)
    store = SqlStore(parse_store_url(urlunsplit(parts._replace(path="/no_such_db"))), "crm", retry=retry)
    start = time.monotonic()
    with pytest.raises(StoreConnectError) as info:
        store.read(query("SELECT 1 WHERE 1 = ?"), [(1,)])
    assert time.monotonic() - start < 1
    assert 'database "no_such_db" does not exist' in str(info.value)
    assert "attempt" not in str(info.value)
    store.close()


def test_sql_errors_and_maybe_applied_writes_are_not_retried() -> None:
    calls = []

    def failing(error: StoreError) -> object:
        calls.append(1)
        raise error

    policy = RetryPolicy(tries=5, base_s=0)
    for error, idempotent in [
        (StoreQueryError("syntax error", store="crm"), True),
        (StoreConnectError("lost", store="crm", transient=True, maybe_applied=True), False),
    ]:
        calls.clear()
        with pytest.raises(type(error)):
            call_with_retries(lambda e=error: failing(e), idempotent=idempotent, policy=policy)  # type: ignore[misc]
        assert len(calls) == 1
    # Lost in flight, but ledgered (idempotent): retried, up to the number of attempts.
    calls.clear()
    lost = StoreConnectError("lost", store="crm", transient=True, maybe_applied=True)
    with pytest.raises(StoreConnectError, match="after 5 attempts"):
        call_with_retries(lambda: failing(lost), idempotent=True, policy=policy)
    assert len(calls) == 5


def test_the_default_policy() -> None:
    # The environment's CEP_STORE_RETRIES / CEP_STORE_RETRY_BASE_MS reach the stores through the
    # deployer's settings (tests/test_store_retry_settings.py); a store given no policy has these.
    assert RetryPolicy() == RetryPolicy(5, 0.5)
    assert SqlStore(parse_store_url("sqlite:///:memory:"), "mem").retry == RetryPolicy()
    assert RedisStore(parse_store_url("redis://127.0.0.1:1/0"), "cache").retry == RetryPolicy()
    # The default waits (0.5 + 1 + 2 + 4 s, ±20%) stay within the ~10 s bound.
    p = RetryPolicy()
    assert sum(p.delay(k) for k in range(1, p.tries)) <= p.max_wait_s


# --------------------------------------------------------------------------------------------------
# Coming back


@pytest.fixture
def proxied_pg(pg_db: str) -> Iterator[tuple[SqlStore, TcpProxy]]:
    parts = urlsplit(pg_db)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE acc (id integer PRIMARY KEY, amount integer)")
        conn.execute("INSERT INTO acc VALUES (1, 100)")
    store = SqlStore(parse_store_url(_through(pg_db, proxy)), "crm", retry=FAST_RETRY)
    yield store, proxy
    store.close()
    proxy.close()


CHARGE = query("UPDATE acc SET amount = amount - ? WHERE id = ?", name="charge")


@pytest.mark.postgres
def test_a_server_back_within_the_retries_is_used_again(
    proxied_pg: tuple[SqlStore, TcpProxy],
    pg_db: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, proxy = proxied_pg
    monkeypatch.setattr(store, "retry", RetryPolicy(tries=8, base_s=0.05))
    assert store.update(CHARGE, [(1, 1)]).counts == [1]  # the pool now holds a connection
    proxy.down()  # the server "restarts": connections cut, new ones refused for a moment
    threading.Timer(0.4, proxy.up).start()
    with caplog.at_level(logging.WARNING, logger="paascep.stores"):
        got = store.update(CHARGE, [(10, 1)], event_ids=["e1"], scope=ledger.scope("d", "n1"))
    assert got.counts == [1]
    assert any("retrying" in r.getMessage() for r in caplog.records)
    with psycopg.connect(pg_db) as conn:
        assert conn.execute("SELECT amount FROM acc").fetchone() == (89,)


@pytest.mark.postgres
def test_a_stale_pooled_connection_does_not_lose_or_double_a_plain_write(
    proxied_pg: tuple[SqlStore, TcpProxy], pg_db: str
) -> None:
    # Without a ledger a write lost in flight cannot be retried (it may have committed), so a
    # pooled connection is checked before such a write: a dead one fails before anything is sent.
    store, proxy = proxied_pg
    assert store.update(CHARGE, [(1, 1)]).counts == [1]
    proxy.kill_connections()
    assert store.update(CHARGE, [(1, 1)]).counts == [1]
    assert store.read(query("SELECT amount FROM acc WHERE id = ?"), [(1,)]) == [[(98,)]]


@pytest.mark.redis
def test_redis_back_within_the_retries(redis_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = urlsplit(redis_db)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    store = RedisStore(parse_store_url(f"redis://127.0.0.1:{proxy.port}{parts.path}"), "cache")
    monkeypatch.setattr(store, "retry", RetryPolicy(tries=8, base_s=0.05))
    try:
        store.materialize(BILL, ["idcaller", "total"], [(1, 1.0)])
        proxy.down()
        threading.Timer(0.4, proxy.up).start()
        got = store.materialize(BILL, ["idcaller", "total"], [(2, 2.0)], ledger_key=("d", "n1", 0))
        assert got.errors == [None]
        import redis

        with redis.Redis.from_url(redis_db, decode_responses=True) as r:
            assert r.hgetall("bill:2") == {"idcaller": "2", "total": "2.0"}
    finally:
        store.close()
        proxy.close()
