"""Materialize on Postgres through COPY (stores/sql/postgres_copy.py): the same table as row-by-row INSERTs.

Each test compares the COPY path with what executing the rows one by one, in order, leaves behind:
repeated keys in one batch (generations), more repeats than generations allow (the row-by-row path),
a refused row in the middle of a large batch, and every column type with awkward values.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pyarrow as pa
import pytest

from operators.datatypes import T_BIGINT, T_BOOLEAN, T_DOUBLE, T_INTEGER, T_TIMESTAMP, DataType, schema_of
from operators.graph import Table
from stores.sql import postgres_copy as pg_bulk
from stores.sql.store import SqlStore
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


def test_more_repeats_than_generations_take_the_row_by_row_path(
    pg: tuple[SqlStore, psycopg.Connection],
) -> None:
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
        (
            1,
            True,
            -(2**63),
            float("inf"),
            Decimal("-123456789.123"),
            'a"b\\c\td',
            datetime(1, 1, 1, tzinfo=UTC),
        ),
        (
            2,
            False,
            2**63 - 1,
            -0.0,
            Decimal("0.001"),
            "\n\r,;'",
            datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
        ),
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


def test_upsert_then_append_of_the_same_columns_in_one_session(
    pg: tuple[SqlStore, psycopg.Connection],
) -> None:
    """The staging table is per connection and emptied at commit: batches never see each other's rows."""
    store, conn = pg
    for batch in range(3):
        rows = [row(i, batch * 100 + i) for i in range(50)]
        assert store.materialize(KEYED, NAMES, rows, ledger_key=("bulk", "n2", batch)).failed == []
        assert store.materialize(LOG, NAMES, rows, ledger_key=("bulk", "n3", batch)).failed == []
    assert conn.execute("SELECT count(*), sum(l - 2^40) FROM keyed").fetchone() == (
        50,
        sum(200 + i for i in range(50)),
    )
    assert conn.execute("SELECT count(*) FROM log").fetchone() == (150,)


def test_keyed_tables_leave_room_for_in_place_updates(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    store.materialize(KEYED, NAMES, [row(1, 1)])
    store.materialize(LOG, NAMES, [row(1, 1)])
    options = dict(
        conn.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN ('keyed', 'log')").fetchall()
    )
    assert options == {"keyed": ["fillfactor=70"], "log": None}


# ---- Arrow batches (what Spark hands over): the same table as the row path ----------------------

ARROW_NAMES = ["k", "b", "l", "d", "v", "ts"]  # no decimal: numeric takes the row path
ARROW_COLUMNS = schema_of(
    ("k", T_INTEGER),
    ("b", T_BOOLEAN),
    ("l", T_BIGINT),
    ("d", T_DOUBLE),
    ("v", DataType("varchar", length=8)),
    ("ts", T_TIMESTAMP),
)


def arrow_table(rows: list[tuple[object, ...]]) -> pa.Table:
    types = [pa.int32(), pa.bool_(), pa.int64(), pa.float64(), pa.string(), pa.timestamp("us", tz="UTC")]
    columns = list(zip(*rows, strict=True))
    return pa.table([pa.array(list(c), t) for c, t in zip(columns, types, strict=True)], names=ARROW_NAMES)


def test_an_arrow_batch_is_stored_as_its_rows_would_be(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    rows = [
        (1, True, -(2**63), float("-inf"), 'a"b\\c', datetime(1, 1, 1, tzinfo=UTC)),
        (2, None, None, None, None, None),
        (3, False, 2**63 - 1, -0.0, "", datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)),
        (4, True, 7, 1e-300, "é€😀", T0),
    ]
    arrow_log = Table("arrow_log", "crm", ARROW_COLUMNS, ())
    row_log = Table("row_log", "crm", ARROW_COLUMNS, ())
    assert store.materialize_arrow(arrow_log, ARROW_NAMES, arrow_table(rows)).failed == []
    assert store.materialize(row_log, ARROW_NAMES, rows).failed == []
    read = "SELECT k, b, l, d::text, v, ts FROM {} ORDER BY k"
    assert (
        conn.execute(read.format("arrow_log")).fetchall() == conn.execute(read.format("row_log")).fetchall()
    )
    assert conn.execute(read.format("arrow_log")).fetchall()[0][:5] == (
        1,
        True,
        -(2**63),
        "-Infinity",
        'a"b\\c',
    )


def test_an_arrow_upsert_with_a_refused_row_and_repeated_keys(
    pg: tuple[SqlStore, psycopg.Connection],
) -> None:
    store, conn = pg
    keyed = Table("arrow_keyed", "crm", ARROW_COLUMNS, ("k",))
    first = [(k, True, k, k / 2, f"v{k}", T0) for k in range(100)]
    assert (
        store.materialize_arrow(keyed, ARROW_NAMES, arrow_table(first), ledger_key=("bulk", "a1", 0)).failed
        == []
    )
    second = [(k, False, -k, 0.0, "w", T0) for k in range(50, 150)]
    second[10] = (60, False, 0, 0.0, "far too long", T0)  # refused: varchar(8)
    second.append((70, True, 70_000, 1.0, "last", T0))  # key 70 twice: the row path, in order
    result = store.materialize_arrow(keyed, ARROW_NAMES, arrow_table(second), ledger_key=("bulk", "a1", 1))
    assert result.failed == [10] and "too long" in (result.errors[10] or "")
    got = dict(conn.execute("SELECT k, v FROM arrow_keyed").fetchall())
    assert len(got) == 150 and got[60] == "v60" and got[70] == "last" and got[149] == "w" and got[0] == "v0"
    replay = store.materialize_arrow(keyed, ARROW_NAMES, arrow_table(second), ledger_key=("bulk", "a1", 1))
    assert replay.replayed and replay.failed == [10]


def test_arrow_encoding_matches_psycopg_for_unique_keys(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    """A batch with unique keys goes through `encode_arrow`; its bytes parse back to the same rows."""
    store, conn = pg
    keyed = Table("arrow_enc", "crm", ARROW_COLUMNS, ("k",))
    rows = [(k, k % 3 == 0, k * 1000, k / 7, f"x{k}", T0 + timedelta(days=k)) for k in range(1000)]
    data = arrow_table(rows)
    store.materialize(keyed, ARROW_NAMES, rows[:1])  # creates the table
    materializer = store._backend.materializer  # type: ignore[attr-defined]
    plan = materializer._plan(keyed, ARROW_NAMES)
    bp = materializer._bulk_plan(plan)
    assert pg_bulk.unique_keys(data, plan, bp)
    payload = pg_bulk.encode_arrow(data, plan, bp)
    assert (
        payload is not None and payload.startswith(b"PGCOPY\n\xff\r\n\x00") and payload.endswith(b"\xff\xff")
    )
    assert store.materialize_arrow(keyed, ARROW_NAMES, data).failed == []
    assert sorted(conn.execute("SELECT k, b, l, d, v, ts FROM arrow_enc").fetchall()) == rows


def test_a_refused_row_in_an_encoded_arrow_batch_fails_alone(pg: tuple[SqlStore, psycopg.Connection]) -> None:
    store, conn = pg
    log = Table("arrow_refused", "crm", ARROW_COLUMNS, ())
    rows = [(k, True, k, 0.5, "ok", T0) for k in range(3000)]
    rows[1234] = (1234, True, 1, 0.5, "nine chars", T0)
    result = store.materialize_arrow(log, ARROW_NAMES, arrow_table(rows), ledger_key=("bulk", "a2", 0))
    assert result.failed == [1234]
    assert conn.execute("SELECT count(*), count(DISTINCT k) FROM arrow_refused").fetchone() == (2999, 2999)
