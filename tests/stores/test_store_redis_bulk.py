"""Materialize into Redis through packed MULTI/EXEC scripts (stores/redis/bulk.py).

Batches larger than a chunk, NULL next to the empty string, a row the server refuses (its key
holds another type) failing alone and recorded for a replay, and appends numbered without gaps
across chunks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pytest
import redis

from operators.datatypes import (
    T_BIGINT,
    T_BOOLEAN,
    T_DOUBLE,
    T_INTEGER,
    T_STRING,
    T_TIMESTAMP,
    DataType,
    schema_of,
)
from operators.graph import Table
from stores.redis import bulk as redis_bulk
from stores.redis.store import RedisStore, marker_key, row_key

pytestmark = pytest.mark.redis

COLUMNS = schema_of(("k", T_INTEGER), ("total", T_DOUBLE), ("note", T_STRING), ("at", T_TIMESTAMP))
NAMES = ["k", "total", "note", "at"]
KEYED = Table("last", "cache", COLUMNS, ("k",), ttl_ms=3_600_000)
LOG = Table("calls", "cache", COLUMNS, ())
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def rows(n: int) -> list[tuple[object, ...]]:
    return [(i, i / 4, f"n;{i}'\x00", T0 + timedelta(microseconds=i)) for i in range(n)]


def test_a_batch_of_several_chunks_is_written_whole_and_once(
    redis_cache: RedisStore, redis_client: redis.Redis
) -> None:
    batch = rows(redis_bulk.CHUNK_ROWS * 2 + 7)
    first = redis_cache.materialize(KEYED, NAMES, batch, ledger_key=("bulk", "n1", 0))
    assert first.failed == [] and not first.replayed
    assert redis_client.dbsize() == len(batch) + 1  # the rows and the batch marker
    last = batch[-1]
    assert redis_client.hgetall(row_key(KEYED, [last[0]])) == {
        "k": str(last[0]),
        "total": repr(last[1]),
        "note": last[2],
        "at": last[3].isoformat(),  # type: ignore[union-attr]
    }
    assert 0 < redis_client.pttl(row_key(KEYED, [0])) <= 3_600_000
    # the replay writes nothing: an overwritten row stays overwritten
    redis_client.hset(row_key(KEYED, [5]), "total", "changed")
    again = redis_cache.materialize(KEYED, NAMES, batch, ledger_key=("bulk", "n1", 0))
    assert again.replayed and again.failed == []
    assert redis_client.hget(row_key(KEYED, [5]), "total") == "changed"


def test_null_removes_the_field_and_the_empty_string_is_kept(
    redis_cache: RedisStore, redis_client: redis.Redis
) -> None:
    redis_cache.materialize(KEYED, NAMES, [(1, 1.0, "x", T0), (2, None, "", None)])
    redis_cache.materialize(KEYED, ["k", "note"], [(1, None)])
    assert redis_client.hgetall(row_key(KEYED, [1])) == {"k": "1", "total": "1.0", "at": T0.isoformat()}
    assert redis_client.hgetall(row_key(KEYED, [2])) == {"k": "2", "note": ""}


def test_a_refused_row_fails_alone_and_a_replay_reports_it_again(
    redis_cache: RedisStore, redis_client: redis.Redis
) -> None:
    redis_client.set(row_key(KEYED, [3]), "a string, not a hash")
    batch = rows(6)
    batch[4] = (None, 1.0, "no key", T0)  # refused before sending: NULL in the primary key
    first = redis_cache.materialize(KEYED, NAMES, batch, ledger_key=("bulk", "n2", 9))
    assert first.failed == [3, 4]
    assert "WRONGTYPE" in (first.errors[3] or "") and "NULL in primary key" in (first.errors[4] or "")
    assert [redis_client.hget(row_key(KEYED, [i]), "k") for i in (0, 1, 2, 5)] == ["0", "1", "2", "5"]
    assert redis_client.get(row_key(KEYED, [3])) == "a string, not a hash"
    again = redis_cache.materialize(KEYED, NAMES, batch, ledger_key=("bulk", "n2", 9))
    assert again.replayed and again.errors == first.errors
    assert redis_client.hget(marker_key(("bulk", "n2", 9)), "~done") == "1"


def test_appends_are_numbered_without_gaps_across_chunks(
    redis_cache: RedisStore, redis_client: redis.Redis
) -> None:
    n = redis_bulk.CHUNK_ROWS + 3
    redis_cache.materialize(LOG, NAMES, rows(n), ledger_key=("bulk", "n3", 0))
    redis_cache.materialize(LOG, NAMES, rows(2), ledger_key=("bulk", "n3", 1))
    redis_cache.materialize(LOG, NAMES, rows(2), ledger_key=("bulk", "n3", 1))  # replay: no new rows
    assert redis_client.get("calls") == str(n + 2)
    keys = {k for k in redis_client.scan_iter("calls:*")}
    assert keys == {f"calls:{i}" for i in range(1, n + 3)}
    assert (
        redis_client.hget(f"calls:{n}", "k") == str(n - 1) and redis_client.hget(f"calls:{n + 1}", "k") == "0"
    )


# ---- Arrow batches (what Spark hands over): the same hashes as the row path ----------------------

WIDE = schema_of(
    ("k", T_BIGINT),
    ("total", T_DOUBLE),
    ("note", T_STRING),
    ("at", T_TIMESTAMP),
    ("vip", T_BOOLEAN),
    ("fee", DataType("decimal", precision=8, scale=2)),
    ("n", T_INTEGER),
)
WIDE_NAMES = ["k", "total", "note", "at", "vip", "fee", "n"]
WIDE_TYPES = [
    pa.int64(),
    pa.float64(),
    pa.string(),
    pa.timestamp("us", tz="UTC"),
    pa.bool_(),
    pa.decimal128(8, 2),
    pa.int32(),
]


def wide_rows() -> list[tuple[object, ...]]:
    return [
        (1, 1.0, "a:b%c", datetime(1, 1, 1, tzinfo=UTC), True, Decimal("1.50"), -7),
        (2, None, "", None, None, None, None),
        (
            3,
            1e16,
            "é€😀\x00",
            datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
            False,
            Decimal("-0.01"),
            0,
        ),
        (
            4,
            -0.0,
            None,
            datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
            True,
            Decimal("0.00"),
            2**31 - 1,
        ),
        (5, float("nan"), "x", T0 + timedelta(microseconds=5), None, Decimal("12.30"), 5),
    ]


def wide_table(rows: list[tuple[object, ...]]) -> pa.Table:
    columns = list(zip(*rows, strict=True))
    return pa.table(
        [pa.array(list(c), t) for c, t in zip(columns, WIDE_TYPES, strict=True)], names=WIDE_NAMES
    )


def test_an_arrow_batch_makes_the_same_hashes_as_its_rows(
    redis_cache: RedisStore, redis_client: redis.Redis
) -> None:
    by_rows = Table("by_rows", "cache", WIDE, ("k",), ttl_ms=60_000)
    by_arrow = Table("by_arrow", "cache", WIDE, ("k",), ttl_ms=60_000)
    redis_cache.materialize(by_rows, WIDE_NAMES, wide_rows())
    assert redis_cache.materialize_arrow(by_arrow, WIDE_NAMES, wide_table(wide_rows())).failed == []
    for k in range(1, 6):
        assert redis_client.hgetall(f"by_arrow:{k}") == redis_client.hgetall(f"by_rows:{k}")
        assert 0 < redis_client.pttl(f"by_arrow:{k}") <= 60_000
    assert redis_client.hgetall("by_arrow:1")["at"] == "0001-01-01T00:00:00+00:00"
    assert redis_client.hgetall("by_arrow:5")["at"] == (T0 + timedelta(microseconds=5)).isoformat()
    assert redis_client.hgetall("by_arrow:2") == {"k": "2", "note": ""}


def test_arrow_appends_replays_and_a_refused_row(redis_cache: RedisStore, redis_client: redis.Redis) -> None:
    log = Table("wide_log", "cache", WIDE, ())
    n = redis_bulk.CHUNK_ROWS + 5
    rows = [(i, i / 2, f"n{i}", T0, i % 2 == 0, Decimal(i) / 4, i) for i in range(n)]
    first = redis_cache.materialize_arrow(log, WIDE_NAMES, wide_table(rows), ledger_key=("bulk", "w1", 0))
    again = redis_cache.materialize_arrow(log, WIDE_NAMES, wide_table(rows), ledger_key=("bulk", "w1", 0))
    assert first.failed == [] and again.replayed
    assert redis_client.get("wide_log") == str(n) and redis_client.hget(f"wide_log:{n}", "k") == str(n - 1)
    keyed = Table("wide_keyed", "cache", WIDE, ("k",))
    redis_client.set("wide_keyed:2", "not a hash")
    result = redis_cache.materialize_arrow(
        keyed, WIDE_NAMES, wide_table(wide_rows()), ledger_key=("bulk", "w2", 0)
    )
    assert result.failed == [1] and "WRONGTYPE" in (result.errors[1] or "")
    assert redis_client.hget("wide_keyed:3", "k") == "3"
