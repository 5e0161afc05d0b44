"""SqlStore against real servers: ReadSQL, UpdateSQL and Materialize on SQLite and Postgres.

Most tests run on both backends (`sql_backend`) and must give the same answers: that is the
contract of the `Stores` protocol, whatever the batch size.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from store_helpers import Backend, query

from operators.datatypes import (
    T_BIGINT,
    T_BOOLEAN,
    T_DOUBLE,
    T_INTEGER,
    T_TIMESTAMP,
    DataType,
    Field,
    Schema,
    schema_of,
)
from operators.graph import Table
from stores.errors import StoreQueryError, StoreSchemaError

PLANS = (
    "CREATE TABLE plans (idcaller integer, idplan varchar(40), name varchar(100))",
    "INSERT INTO plans VALUES (1, 'gold', 'a'), (1, 'silver', 'b'), (2, 'bronze', 'c'), (3, NULL, 'd')",
)
FIGURE_3 = "SELECT idplan FROM plans WHERE idcaller = ?"

HOSTILE = [
    "O'Brien",
    "it''s",
    'say "hi"',
    "a;b",
    "'; DROP TABLE plans; --",
    "x' OR '1'='1",
    "%s %(x)s %% ? $1 :p1",
    "back\\slash",
    "naïve 🚀 ünïcödé",
    "line\nbreak\ttab",
    "/* not a comment */",
    "",
]


def _sorted(result: list[list[tuple[object, ...]]]) -> list[list[tuple[object, ...]]]:
    return [sorted(rows, key=repr) for rows in result]


# --------------------------------------------------------------------------------------------------
# ReadSQL


def test_figure_3_lookup_batch(sql_backend: Backend) -> None:
    sql_backend.execute(*PLANS)
    q = query(FIGURE_3)
    params = [(1,), (2,), (99,), (None,), (3,), (1,)]
    got = sql_backend.store.read(q, params)
    assert _sorted(got) == [
        [("gold",), ("silver",)],  # several rows for one event
        [("bronze",)],
        [],  # no row
        [],  # NULL parameter: `idcaller = NULL` matches nothing
        [(None,)],  # a NULL in the result is a row, not an absence
        [("gold",), ("silver",)],  # the same key twice in a batch
    ]


@pytest.mark.parametrize("params", [[(None,)], [(2,)], [(None,), (None,)]])
def test_batch_of_one_and_all_null_batches(sql_backend: Backend, params: list[tuple[object]]) -> None:
    # The reference executor sends batches of one; a lone NULL must not break typing on Postgres.
    sql_backend.execute(*PLANS)
    expected = [[("bronze",)] if p == (2,) else [] for p in params]
    assert sql_backend.store.read(query(FIGURE_3), params) == expected


def test_hostile_strings_arrive_byte_for_byte(sql_backend: Backend) -> None:
    sql_backend.execute(*PLANS)
    sql_backend.execute("CREATE TABLE people (id integer, name varchar(100))")
    # Inserted by the store itself, as parameters of an UpdateSQL batch...
    insert = query("INSERT INTO people (id, name) VALUES (?, ?)")
    assert sql_backend.store.update(insert, list(enumerate(HOSTILE))).counts == [1] * len(HOSTILE)
    # ...looked up by value, and echoed back.
    lookup = query("SELECT id, name FROM people WHERE name = ?")
    got = sql_backend.store.read(lookup, [(s,) for s in HOSTILE])
    assert got == [[(i, s)] for i, s in enumerate(HOSTILE)]
    echo = sql_backend.store.read(query("SELECT ? AS v"), [(s,) for s in HOSTILE])
    assert echo == [[(s,)] for s in HOSTILE]
    # The table the injection attempt names is still there, untouched.
    assert sql_backend.fetch("SELECT count(*) FROM plans") == [(4,)]
    assert sql_backend.fetch("SELECT count(*) FROM people") == [(len(HOSTILE),)]


def test_rows_keep_the_order_by_of_each_event(sql_backend: Backend) -> None:
    sql_backend.execute("CREATE TABLE calls (idcaller integer, seq integer)")
    values = [(c, s) for c in (1, 2, 3) for s in range(60)]
    random.Random(7).shuffle(values)
    sql_backend.execute("INSERT INTO calls VALUES " + ", ".join(f"({c}, {s})" for c, s in values))
    q = query("SELECT seq FROM calls WHERE idcaller = ? ORDER BY seq DESC")
    params = [(2,), (1,), (3,), (2,), (7,), (1,)] * 5
    got = sql_backend.store.read(q, params)
    desc = [(s,) for s in range(59, -1, -1)]
    assert got == [desc if c != 7 else [] for (c,) in params]
    # LIMIT applies per event, not to the whole batch.
    top = sql_backend.store.read(
        query("SELECT seq FROM calls WHERE idcaller = ? ORDER BY seq LIMIT 2"), params
    )
    assert top == [[(0,), (1,)] if c != 7 else [] for (c,) in params]


def test_query_text_variants(sql_backend: Backend) -> None:
    sql_backend.execute(*PLANS)
    # The paper names ReadSQL results `p`; the user may alias a table `p` too.
    aliased = query("SELECT p.idplan FROM plans p WHERE p.idcaller = ? ORDER BY p.idplan")
    assert sql_backend.store.read(aliased, [(1,), (2,)]) == [[("gold",), ("silver",)], [("bronze",)]]
    # A trailing semicolon and comment, a literal `%` and a `?` inside a string literal.
    odd = query("SELECT idplan, '?%' AS lit FROM plans WHERE idcaller = ? AND name LIKE '%'; -- end")
    assert odd.param_count == 1
    assert sql_backend.store.read(odd, [(2,)]) == [[("bronze", "?%")]]
    # No parameters: every event gets the rows.
    count = query("SELECT count(*) FROM plans")
    assert sql_backend.store.read(count, [(), (), ()]) == [[(4,)], [(4,)], [(4,)]]
    # Two parameters of different types, with NULLs.
    two = query("SELECT name FROM plans WHERE idcaller = ? AND idplan = ?")
    assert sql_backend.store.read(two, [(1, "gold"), (1, None), (None, "gold"), (2, "bronze")]) == [
        [("a",)],
        [],
        [],
        [("c",)],
    ]


def test_empty_batch_and_wrong_arity(sql_backend: Backend) -> None:
    sql_backend.execute(*PLANS)
    assert sql_backend.store.read(query(FIGURE_3), []) == []
    with pytest.raises(StoreQueryError, match="takes 1 parameter"):
        sql_backend.store.read(query(FIGURE_3), [(1,), (1, 2)])


def test_database_error_names_store_and_query(sql_backend: Backend) -> None:
    with pytest.raises(StoreQueryError) as info:
        sql_backend.store.read(query("SELECT x FROM missing_table WHERE x = ?", name="plan_of"), [(1,)])
    message = str(info.value)
    assert message.startswith("store crm (")
    assert "plan_of" in message and "missing_table" in message


def test_typed_parameters_and_results_round_trip(sql_backend: Backend) -> None:
    table = Table(
        "ledger",
        "crm",
        schema_of(
            ("id", T_INTEGER),
            ("ts", T_TIMESTAMP),
            ("amount", DataType("decimal", precision=10, scale=2)),
            ("ok", T_BOOLEAN),
            ("ratio", T_DOUBLE),
        ),
        ("id",),
    )
    t0 = datetime(2024, 3, 1, 12, 30, tzinfo=UTC)
    rows = [(i, t0 + timedelta(hours=i), Decimal(f"{i}.25"), i % 2 == 0, i / 4) for i in range(6)]
    sql_backend.store.materialize(table, ["id", "ts", "amount", "ok", "ratio"], rows)
    returns = Schema(tuple(table.columns.fields))
    q = query(
        "SELECT id, ts, amount, ok, ratio FROM ledger WHERE ts >= ? AND amount > ? AND ok = ? ORDER BY id",
        returns=returns,
    )
    got = sql_backend.store.read(
        q, [(t0 + timedelta(hours=2), Decimal("1.5"), True), (t0, Decimal("0"), False)]
    )
    assert got == [[rows[2], rows[4]], [rows[1], rows[3], rows[5]]]
    ts = got[0][0][1]
    assert isinstance(ts, datetime) and ts.utcoffset() == timedelta(0)
    assert isinstance(got[0][0][2], Decimal)


# --------------------------------------------------------------------------------------------------
# UpdateSQL


def test_update_applies_in_order_with_rowcounts(sql_backend: Backend) -> None:
    sql_backend.execute(
        "CREATE TABLE t (k integer PRIMARY KEY, x integer)", "INSERT INTO t VALUES (1, 0), (2, 0)"
    )
    set_x = query("UPDATE t SET x = ? WHERE k = ?")
    result = sql_backend.store.update(set_x, [(10, 1), (20, 2), (30, 1), (40, 99), (50, 1)])
    assert result.counts == [1, 1, 1, 0, 1]
    assert result.errors == [None] * 5
    assert sql_backend.fetch("SELECT k, x FROM t ORDER BY k") == [(1, 50), (2, 20)]  # last write wins
    # An order-dependent effect: x = x*10 + d applied for d = 1, 2, 3 gives 123 only in order.
    sql_backend.execute("UPDATE t SET x = 0")
    shift = query("UPDATE t SET x = x * 10 + ? WHERE k = ?")
    assert sql_backend.store.update(shift, [(1, 1), (2, 1), (3, 1), (9, 3)]).counts == [1, 1, 1, 0]
    assert sql_backend.fetch("SELECT x FROM t WHERE k = 1") == [(123,)]


def test_insert_and_delete_rowcounts(sql_backend: Backend) -> None:
    sql_backend.execute("CREATE TABLE t (k integer PRIMARY KEY, x integer)")
    insert = query("INSERT INTO t VALUES (?, ?)")
    assert sql_backend.store.update(insert, [(k, k * k) for k in range(5)]).counts == [1] * 5
    delete = query("DELETE FROM t WHERE k < ?")
    assert sql_backend.store.update(delete, [(2,), (2,), (4,), (100,)]).counts == [2, 0, 2, 1]
    assert sql_backend.store.update(delete, []).counts == []
    assert sql_backend.fetch("SELECT count(*) FROM t") == [(0,)]


def test_a_failing_event_is_isolated_and_reported(sql_backend: Backend) -> None:
    sql_backend.execute("CREATE TABLE t (k integer PRIMARY KEY, x integer)", "INSERT INTO t VALUES (1, 0)")
    insert = query("INSERT INTO t VALUES (?, ?)", name="add")
    result = sql_backend.store.update(insert, [(2, 0), (3, 0), (1, 0), (4, 0)])  # (1, 0) exists
    assert result.counts == [1, 1, None, 1]
    assert result.failed == [2]
    message = result.errors[2] or ""
    assert message.startswith("store crm (") and "add" in message
    assert "unique" in message.lower()
    assert sql_backend.fetch("SELECT k FROM t ORDER BY k") == [(1,), (2,), (3,), (4,)]
    # The store is still usable afterwards.
    assert sql_backend.store.update(insert, [(5, 0)]).counts == [1]


def test_an_error_that_is_not_about_one_event_fails_the_batch(sql_backend: Backend) -> None:
    sql_backend.execute("CREATE TABLE t (k integer PRIMARY KEY, x integer)")
    with pytest.raises(StoreQueryError) as info:
        sql_backend.store.update(query("INSERT INTO missing VALUES (?, ?)"), [(1, 0), (2, 0)])
    # the query by name, no batch size: the message is the same whatever the batches (both engines)
    assert "query q: " in str(info.value) and "batch" not in str(info.value)
    assert not info.value.about_event
    assert sql_backend.fetch("SELECT count(*) FROM t") == [(0,)]


def test_select_and_update_are_not_interchangeable(sql_backend: Backend) -> None:
    with pytest.raises(StoreQueryError, match="not a SELECT"):
        sql_backend.store.read(query("UPDATE t SET x = ?"), [(1,)])
    with pytest.raises(StoreQueryError, match="use read"):
        sql_backend.store.update(query(FIGURE_3), [(1,)])


# --------------------------------------------------------------------------------------------------
# Materialize

BILL = Table(
    "Daily_Bill",
    "crm",
    Schema((Field("IdCaller", T_INTEGER), Field("total", T_DOUBLE), Field("calls", T_BIGINT))),
    ("IdCaller",),
)


def test_materialize_upserts_by_primary_key(sql_backend: Backend) -> None:
    store = sql_backend.store
    store.materialize(BILL, ["idcaller", "total", "calls"], [(1, 10.0, 1), (2, 5.0, 1), (1, 12.5, 2)])
    store.materialize(BILL, ["IDCALLER", "total", "calls"], [(2, 7.0, 3), (3, None, 1)])
    # Plain names are stored lower-case, so unquoted SQL finds them in any case.
    assert sql_backend.fetch("SELECT idcaller, total, calls FROM daily_bill ORDER BY idcaller") == [
        (1, 12.5, 2),
        (2, 7.0, 3),
        (3, None, 1),
    ]
    # A subset of the columns updates only those.
    store.materialize(BILL, ["total", "idcaller"], [(99.0, 1)])
    assert sql_backend.fetch("SELECT total, calls FROM daily_bill WHERE idcaller = 1") == [(99.0, 2)]
    # Only the key: inserts when missing, leaves an existing row alone.
    store.materialize(BILL, ["idcaller"], [(1,), (4,)])
    assert sql_backend.fetch(
        "SELECT idcaller, total, calls FROM daily_bill WHERE idcaller IN (1, 4) ORDER BY 1"
    ) == [
        (1, 99.0, 2),
        (4, None, None),
    ]


def test_materialize_appends_without_primary_key(sql_backend: Backend) -> None:
    log = Table("call_log", "crm", schema_of(("idcaller", T_INTEGER), ("cost", T_DOUBLE)))
    sql_backend.store.materialize(log, ["idcaller", "cost"], [(1, 2.0), (1, 2.0)])
    sql_backend.store.materialize(log, ["cost", "idcaller"], [(3.0, 1)])
    sql_backend.store.materialize(log, ["idcaller", "cost"], [])
    assert sql_backend.fetch("SELECT idcaller, cost FROM call_log ORDER BY cost") == [
        (1, 2.0),
        (1, 2.0),
        (1, 3.0),
    ]


def test_materialize_refuses_a_different_existing_table(sql_backend: Backend) -> None:
    sql_backend.execute(
        "CREATE TABLE daily_bill (idcaller integer PRIMARY KEY, total varchar(10), calls bigint)",
        "INSERT INTO daily_bill VALUES (1, 'keep', 1)",
    )
    with pytest.raises(StoreSchemaError) as info:
        sql_backend.store.materialize(BILL, ["idcaller", "total"], [(1, 2.0)])
    message = str(info.value)
    assert "never altered" in message
    assert "existing: (idcaller integer, total varchar(10), calls bigint) PRIMARY KEY (idcaller)" in message
    assert "declared: (idcaller integer, total double, calls bigint) PRIMARY KEY (idcaller)" in message
    assert sql_backend.fetch("SELECT total FROM daily_bill") == [("keep",)]


def test_materialize_refuses_a_different_primary_key(sql_backend: Backend) -> None:
    sql_backend.execute("CREATE TABLE daily_bill (idcaller integer, total double precision, calls bigint)")
    with pytest.raises(StoreSchemaError, match=r"existing: .*calls bigint\)\n"):
        sql_backend.store.materialize(BILL, ["idcaller", "total"], [(1, 2.0)])


def test_materialize_accepts_an_existing_table_it_created(sql_backend: Backend) -> None:
    sql_backend.store.materialize(BILL, ["idcaller", "total", "calls"], [(1, 1.0, 1)])
    sql_backend.store.close()  # a new process would check the table again and find it matching
    sql_backend.store.materialize(BILL, ["idcaller", "total", "calls"], [(1, 2.0, 2)])
    assert sql_backend.fetch("SELECT idcaller, total, calls FROM daily_bill") == [(1, 2.0, 2)]


def test_materialize_rejects_bad_columns(sql_backend: Backend) -> None:
    with pytest.raises(StoreQueryError, match="no column"):
        sql_backend.store.materialize(BILL, ["idcaller", "nope"], [(1, 2)])
    with pytest.raises(StoreQueryError, match="lack its primary key"):
        sql_backend.store.materialize(BILL, ["total"], [(1.0,)])
