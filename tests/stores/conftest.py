"""Fixtures for the store tests: one SQL store per backend (SQLite file, real Postgres database).

`sql_backend` parametrizes a test over both backends; the Postgres case carries the `postgres`
marker, so `-m "not postgres"` still runs the SQLite half.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from store_helpers import FAST_RETRY, Backend

from stores.redis.store import RedisStore
from stores.sql.store import SqlStore
from stores.urls import parse_store_url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def sql_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        url = parse_store_url(f"sqlite:///{tmp_path / 'crm.sqlite3'}")
    else:
        url = parse_store_url(request.getfixturevalue("pg_db"))
    store = SqlStore(url, "crm", retry=FAST_RETRY)
    yield Backend(request.param, url, store)
    store.close()


@pytest.fixture
def pg_backend(pg_db: str) -> Iterator[Backend]:
    """The Postgres half of `sql_backend`, for Postgres-only tests (mark them `postgres`)."""
    url = parse_store_url(pg_db)
    store = SqlStore(url, "crm", retry=FAST_RETRY)
    yield Backend("postgresql", url, store)
    store.close()


@pytest.fixture
def redis_cache(redis_db: str) -> Iterator[RedisStore]:
    """A Redis store named `cache` on an emptied database."""
    s = RedisStore(parse_store_url(redis_db), "cache", retry=FAST_RETRY)
    yield s
    s.close()


@pytest.fixture
def redis_client(redis_db: str) -> Iterator[redis.Redis]:
    """A client of the same database, answering str."""
    with redis.Redis.from_url(redis_db, decode_responses=True) as client:
        yield client
