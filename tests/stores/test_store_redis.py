"""RedisStore against a real Redis: hashes per row, collision-free keys, TTL, upsert and append."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
import redis
from store_helpers import query

from operators.datatypes import T_BOOLEAN, T_DOUBLE, T_INTEGER, T_STRING, T_TIMESTAMP, DataType, schema_of
from operators.graph import Table
from stores.errors import StoreQueryError, StoreUnsupportedError
from stores.redis.store import RedisStore, row_key

pytestmark = pytest.mark.redis

DAY_MS = 86_400_000
LIVE_BILL = Table(
    "live_bill",
    "cache",
    schema_of(
        ("idcaller", T_INTEGER),
        ("total", T_DOUBLE),
        ("at", T_TIMESTAMP),
        ("vip", T_BOOLEAN),
        ("fee", DataType("decimal", precision=8, scale=2)),
        ("note", T_STRING),
    ),
    ("idcaller",),
    ttl_ms=DAY_MS,
)
COLUMNS = ["idcaller", "total", "at", "vip", "fee", "note"]


def test_upsert_encodes_values_and_sets_ttl(redis_cache: RedisStore, redis_client: redis.Redis) -> None:
    at = datetime(2024, 1, 2, 4, 4, 5, tzinfo=timezone(timedelta(hours=1)))
    redis_cache.materialize(
        LIVE_BILL,
        COLUMNS,
        [
            (7, 1.5, at, True, Decimal("0.10"), "first"),
            (8, 2.0, None, False, None, None),
            (7, 2.25, at + timedelta(seconds=1), False, Decimal("3.50"), None),  # same key: latest wins
        ],
    )
    assert sorted(redis_client.keys("*")) == ["live_bill:7", "live_bill:8"]
    assert redis_client.hgetall("live_bill:7") == {
        "idcaller": "7",
        "total": "2.25",
        "at": "2024-01-02T03:04:06+00:00",  # ISO 8601, converted to UTC
        "vip": "false",
        "fee": "3.50",
        # "note" was set by the first row and removed by the NULL of the last one
    }
    assert redis_client.hgetall("live_bill:8") == {"idcaller": "8", "total": "2.0", "vip": "false"}
    for key in ("live_bill:7", "live_bill:8"):
        assert DAY_MS - 60_000 < redis_client.pttl(key) <= DAY_MS

    # A later batch with a subset of the columns leaves the other fields alone.
    redis_cache.materialize(LIVE_BILL, ["total", "idcaller"], [(9.0, 8)])
    assert redis_client.hgetall("live_bill:8") == {"idcaller": "8", "total": "9.0", "vip": "false"}


def test_key_encoding_cannot_collide_or_escape_the_prefix(
    redis_cache: RedisStore, redis_client: redis.Redis
) -> None:
    table = Table("t:x", "cache", schema_of(("a", T_STRING), ("b", T_STRING), ("v", T_INTEGER)), ("a", "b"))
    rows = [
        ("a:b", "c", 1),
        ("a", "b:c", 2),
        ("a%3Ab", "c", 3),  # what a naive encoding of the first row's key part would produce
        ("", ":", 4),
        ("%", "", 5),
    ]
    redis_cache.materialize(table, ["a", "b", "v"], rows)
    keys = {row_key(table, (a, b)): v for a, b, v in rows}
    assert len(keys) == len(rows)
    assert sorted(keys) == sorted(
        ["t%3Ax:a%3Ab:c", "t%3Ax:a:b%3Ac", "t%3Ax:a%253Ab:c", "t%3Ax::%3A", "t%3Ax:%25:"]
    )
    for key, v in keys.items():
        assert key.startswith("t%3Ax:") and key.count(":") == 2
        assert redis_client.hget(key, "v") == str(v)
    assert redis_client.dbsize() == len(rows)
    assert redis_client.pttl("t%3Ax:a%3Ab:c") == -1  # no TTL declared, none set


def test_append_without_primary_key(redis_cache: RedisStore, redis_client: redis.Redis) -> None:
    log = Table("call_log", "cache", schema_of(("idcaller", T_INTEGER), ("cost", T_DOUBLE)), ttl_ms=60_000)
    redis_cache.materialize(log, ["idcaller", "cost"], [(1, 2.0), (1, 2.0)])
    redis_cache.materialize(log, ["cost", "idcaller"], [(3.0, 2)])
    assert sorted(redis_client.keys("call_log:*")) == ["call_log:1", "call_log:2", "call_log:3"]
    assert [redis_client.hgetall(f"call_log:{i}") for i in (1, 2, 3)] == [
        {"idcaller": "1", "cost": "2.0"},
        {"idcaller": "1", "cost": "2.0"},
        {"idcaller": "2", "cost": "3.0"},
    ]
    assert 0 < redis_client.pttl("call_log:3") <= 60_000 and 0 < redis_client.pttl("call_log") <= 60_000


def test_bad_rows_and_sql_are_refused(redis_cache: RedisStore, redis_client: redis.Redis) -> None:
    # A NULL key fails that row only: reported, not written, the others are.
    result = redis_cache.materialize(LIVE_BILL, ["idcaller", "total"], [(None, 1.0), (5, 2.0)])
    assert result.failed == [0]
    assert "NULL in primary key" in (result.errors[0] or "")
    assert str(result.errors[0]).startswith("store cache (redis://")
    assert redis_client.keys("*") == ["live_bill:5"]
    redis_client.flushdb()
    with pytest.raises(StoreQueryError, match="lack its primary key"):
        redis_cache.materialize(LIVE_BILL, ["total"], [(1.0,)])
    with pytest.raises(StoreQueryError, match="no column"):
        redis_cache.materialize(LIVE_BILL, ["idcaller", "nope"], [(1, 1)])
    with pytest.raises(StoreUnsupportedError, match="Redis is not a SQL store"):
        redis_cache.read(query("SELECT 1 WHERE 1 = ?", store="cache"), [(1,)])
    with pytest.raises(StoreUnsupportedError, match="Redis is not a SQL store"):
        redis_cache.update(query("UPDATE t SET x = ?", store="cache"), [(1,)])
    assert redis_client.dbsize() == 0
