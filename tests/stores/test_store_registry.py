"""StoreRegistry: dispatch by store name to real stores, closing, and credentials kept out of errors."""

from __future__ import annotations

import socket
import traceback
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis
from store_helpers import FAST_RETRY, query

from operators.datatypes import T_DOUBLE, T_INTEGER, schema_of
from operators.graph import DataStore, Table
from stores.bindings import StoreBindings, resolve_bindings
from stores.errors import StoreConfigError, StoreConnectError, StoreError, StoreQueryError
from stores.registry import StoreRegistry
from stores.urls import parse_store_url

SENTINEL = "S3ntinel-pw_xyzzy"
DECLARED = {
    "crm": DataStore("crm", "postgresql"),
    "local": DataStore("Local", "postgresql"),  # left unbound: the embedded SQLite default
    "cache": DataStore("cache", "redis"),
}
BILL = schema_of(("idcaller", T_INTEGER), ("total", T_DOUBLE))


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username or ''}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _everything_shown(e: BaseException) -> str:
    return "".join(traceback.format_exception(e)) + repr(e)


@pytest.mark.postgres
@pytest.mark.redis
def test_dispatch_to_each_store(pg_db: str, redis_db: str, tmp_path: Path) -> None:
    # The local Postgres trusts its clients, so a password in the URL is accepted and ignored.
    crm_url = _with_password(pg_db, SENTINEL)
    bindings = resolve_bindings(
        DECLARED, {"crm": crm_url}, {"CEP_STORE_CACHE_URL": redis_db}, tmp_path, retry=FAST_RETRY
    )
    reg = StoreRegistry(bindings)
    assert SENTINEL not in repr(reg)
    try:
        create = query("CREATE TABLE plans (idcaller integer, idplan text)", store="CRM")
        assert reg.update(create, [()]).counts == [-1]
        assert reg.update(query("INSERT INTO plans VALUES (?, ?)", store="crm"), [(1, "gold")]).counts == [1]
        assert reg.read(query("SELECT idplan FROM plans WHERE idcaller = ?", store="Crm"), [(1,), (2,)]) == [
            [("gold",)],
            [],
        ]
        reg.materialize(Table("bill", "local", BILL, ("idcaller",)), ["idcaller", "total"], [(1, 2.5)])
        reg.materialize(Table("bill", "cache", BILL, ("idcaller",)), ["idcaller", "total"], [(1, 3.5)])
        reg.materialize(Table("bill", "crm", BILL, ("idcaller",)), ["idcaller", "total"], [(1, 4.5)])

        local = reg.read(query("SELECT total FROM bill WHERE idcaller = ?", store="LOCAL"), [(1,)])
        assert local == [[(2.5,)]]
        assert (tmp_path / "Local.sqlite3").exists()
        with redis.Redis.from_url(redis_db, decode_responses=True) as r:
            assert r.hgetall("bill:1") == {"idcaller": "1", "total": "3.5"}
        with psycopg.connect(pg_db) as conn:
            assert conn.execute("SELECT idcaller, total FROM bill").fetchall() == [(1, 4.5)]

        # A database error names the store, shows the URL redacted, and never the password.
        with pytest.raises(StoreQueryError) as info:
            reg.read(query("SELECT nope FROM plans WHERE idcaller = ?", store="crm"), [(1,)])
        shown = _everything_shown(info.value)
        assert SENTINEL not in shown
        assert str(info.value).startswith("store crm (postgresql://postgres:***@")
        assert 'column "nope" does not exist' in str(info.value)

        with pytest.raises(
            StoreConfigError, match=r"no data store nowhere is declared \(declared: Local, cache, crm\)"
        ):
            reg.read(query("SELECT 1 WHERE 1 = ?", store="nowhere"), [(1,)])
    finally:
        reg.close()
    with psycopg.connect(pg_db) as conn:  # close() released the pool's connections
        left = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert left == (0,)


def test_unreachable_postgres_error_is_redacted() -> None:
    url = parse_store_url(f"postgresql://alice:{SENTINEL}@127.0.0.1:{_free_port()}/db?connect_timeout=2")
    reg = StoreRegistry(StoreBindings({"crm": url}, {"crm": DataStore("crm", "postgresql")}, FAST_RETRY))
    with pytest.raises(StoreConnectError) as info:
        reg.read(query("SELECT 1 WHERE 1 = ?"), [(1,)])
    assert "store crm (postgresql://alice:***@127.0.0.1:" in str(info.value)
    assert "refused" in str(info.value).lower()
    assert SENTINEL not in _everything_shown(info.value)
    reg.close()


def test_unreachable_redis_error_is_redacted() -> None:
    url = parse_store_url(f"redis://:{SENTINEL}@127.0.0.1:{_free_port()}/0")
    reg = StoreRegistry(StoreBindings({"cache": url}, {"cache": DataStore("cache", "redis")}, FAST_RETRY))
    with pytest.raises(StoreConnectError) as info:
        reg.materialize(Table("bill", "cache", BILL, ("idcaller",)), ["idcaller", "total"], [(1, 1.0)])
    assert "store cache (redis://:***@127.0.0.1:" in str(info.value)
    assert SENTINEL not in _everything_shown(info.value)
    reg.close()


@pytest.mark.redis
def test_redis_rejecting_the_password_is_redacted(redis_db: str) -> None:
    # The test server has no password: AUTH with one fails, and the error must not echo it.
    url = parse_store_url(_with_password(redis_db, SENTINEL))
    reg = StoreRegistry(StoreBindings({"cache": url}, {"cache": DataStore("cache", "redis")}, FAST_RETRY))
    with pytest.raises(StoreError) as info:
        reg.materialize(Table("bill", "cache", BILL, ("idcaller",)), ["idcaller", "total"], [(1, 1.0)])
    assert "AUTH" in str(info.value)
    assert SENTINEL not in _everything_shown(info.value)
    reg.close()
