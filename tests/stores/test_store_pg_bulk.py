"""Materialize on Postgres through COPY (stores/pg_bulk.py): the same table as row-by-row INSERTs.

Each test compares the COPY path with what executing the rows one by one, in order, leaves behind:
repeated keys in one batch (generations), more repeats than generations allow (the row-by-row path),
a refused row in the middle of a large batch, and every column type with awkward values.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest

from operators.graph import Table
from operators.types import T_BIGINT, T_BOOLEAN, T_DOUBLE, T_INTEGER, T_TIMESTAMP, DataType, schema_of
from stores import pg_bulk
from stores.sql import SqlStore
from stores.urls import parse_store_url

pytestmark = pytest.mark.postgres

COLUMNS = schema_of(
    ("k", T_INTEGER),
    ("b", T_BOOLEAN),
    ("l", T_BIGINT),
    ("d", T_DOUBLE),
    ("n", DataType("decimal", precision=12, scale=3)),
    ("v", DataType("varchar", length=8)),
    ("ts", T_TIMESTAMP),
)
KEYED = Table("keyed", "crm", COLUMNS, ("k",))
LOG = Table("log", "crm", COLUMNS, ())
NAMES = ["k", "b", "l", "d", "n", "v", "ts"]
T0 = datetime(2024, 2, 29, 23, 59, 59, 999_999, tzinfo=UTC)


@pytest.fixture
def pg(pg_db: str) -> Iterator[tuple[SqlStore, psycopg.Connection[tuple[object, ...]]]]:
    store = SqlStore(parse_store_url(pg_db), "crm")
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        yield store, conn
    store.close()


def row(k: int, i: int) -> tuple[object, ...]:
    return (k, i % 2 == 0, 2**40 + i, i / 3, Decimal(i) / 8, f"'{i};--"[:8], T0 + timedelta(microseconds=i))


def table_rows(conn: psycopg.Connection[tuple[object, ...]], name: str) -> list[tuple[object, ...]]:
    return sorted(conn.execute(f"SELECT k, b, l, d, n, v, ts FROM {name}").fetchall(), key=repr)


def test_repeated_keys_in_one_batch_end_as_the_last_row(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    # key 1 three times, key 2 twice, key 3 once: three generations, the last row of each key wins
    rows = [row(1, 1), row(2, 2), row(1, 3), row(3, 4), row(2, 5), row(1, 6)]
    assert pg_bulk.generations(rows, (0,)) == [1, 1, 2, 1, 2, 3]
    assert store.materialize(KEYED, NAMES, rows).failed == []
    assert table_rows(conn, "keyed") == sorted([row(1, 6), row(2, 5), row(3, 4)], key=repr)
    # a NULL column in a later row clears the stored value, as an UPDATE would
    store.materialize(KEYED, ["k", "v"], [(3, "x"), (3, None)])
    assert conn.execute("SELECT v FROM keyed WHERE k = 3").fetchone() == (None,)


def test_more_repeats_than_generations_take_the_row_by_row_path(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    rows = [row(7, i) for i in range(pg_bulk.MAX_GENERATIONS + 5)] + [row(8, 0)]
    with pytest.raises(pg_bulk.TooManyGenerations):
        pg_bulk.generations(rows, (0,))
    assert store.materialize(KEYED, NAMES, rows).failed == []
    assert table_rows(conn, "keyed") == sorted([rows[-2], rows[-1]], key=repr)


def test_a_refused_row_in_a_large_append_fails_alone(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    rows = [row(i, i) for i in range(5000)]
    rows[2345] = (*rows[2345][:5], "too long for eight", rows[2345][6])
    result = store.materialize(LOG, NAMES, rows, ledger_key=("bulk", "n1", 0))
    assert result.failed == [2345]
    assert "value too long" in (result.errors[2345] or "")
    stored = table_rows(conn, "log")
    assert len(stored) == 4999
    assert stored == sorted(rows[:2345] + rows[2346:], key=repr)
    # the replay is skipped and reports the same refused row
    again = store.materialize(LOG, NAMES, rows, ledger_key=("bulk", "n1", 0))
    assert again.replayed and again.failed == [2345]
    assert conn.execute("SELECT count(*) FROM log").fetchone() == (4999,)


def test_copy_keeps_every_type_exact(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    awkward = [
        (1, True, -(2**63), float("inf"), Decimal("-123456789.123"), 'a"b\\c\td', datetime(1, 1, 1, tzinfo=UTC)),
        (2, False, 2**63 - 1, -0.0, Decimal("0.001"), "\n\r,;'", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
        (3, None, None, float("nan"), None, "", None),
        (4, None, 0, 1e-300, Decimal("1.5"), "é€😀", T0),
    ]
    assert store.materialize(LOG, NAMES, awkward).failed == []
    got = {r[0]: r for r in conn.execute("SELECT k, b, l, d, n, v, ts FROM log").fetchall()}
    for want in awkward:
        have = got[want[0]]
        assert have[:3] + have[4:] == want[:3] + want[4:]
        assert repr(have[3]) == repr(want[3])  # nan, inf and -0.0 included
    # decimal(12, 3) rounds on input as an INSERT does
    store.materialize(LOG, ["k", "n"], [(5, Decimal("1.23456"))])
    assert conn.execute("SELECT n FROM log WHERE k = 5").fetchone() == (Decimal("1.235"),)


def test_upsert_then_append_of_the_same_columns_in_one_session(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    """The staging table is per connection and emptied at commit: batches never see each other's rows."""
    store, conn = pg
    for batch in range(3):
        rows = [row(i, batch * 100 + i) for i in range(50)]
        assert store.materialize(KEYED, NAMES, rows, ledger_key=("bulk", "n2", batch)).failed == []
        assert store.materialize(LOG, NAMES, rows, ledger_key=("bulk", "n3", batch)).failed == []
    assert conn.execute("SELECT count(*), sum(l - 2^40) FROM keyed").fetchone() == (50, sum(200 + i for i in range(50)))
    assert conn.execute("SELECT count(*) FROM log").fetchone() == (150,)


def test_keyed_tables_leave_room_for_in_place_updates(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    store.materialize(KEYED, NAMES, [row(1, 1)])
    store.materialize(LOG, NAMES, [row(1, 1)])
    options = dict(conn.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN ('keyed', 'log')").fetchall())
    assert options == {"keyed": ["fillfactor=70"], "log": None}
