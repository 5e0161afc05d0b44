"""UpdateSQL on Postgres as one server-side loop per batch (stores/sql/postgres_update_loop.py), and
the way back to one statement per event for what the loop cannot hold, against a real server."""

from __future__ import annotations

import logging

import pytest
from store_helpers import FAST_RETRY, Backend, query

from stores import ledger
from stores.api import UpdateResult
from stores.sql.store import SqlStore
from stores.urls import parse_store_url

pytestmark = pytest.mark.postgres

SCOPE = ledger.scope("billing", "n4")
PRODUCTS = (
    "CREATE TABLE t (id integer PRIMARY KEY, v bigint NOT NULL DEFAULT 0 CHECK (v < 1000000), d date)",
    "INSERT INTO t (id) VALUES (1), (2), (3)",
)
_FUNCTIONS = (
    "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
    " WHERE n.nspname LIKE 'pg\\_temp\\_%' AND p.proname LIKE '\\_cep\\_update\\_%'"
)


def _rows(b: Backend) -> list[tuple[object, ...]]:
    return b.fetch("SELECT id, v, d::text FROM t ORDER BY id")


def test_a_ledgered_batch_is_one_call_of_a_function_that_also_writes_the_ledger(pg_backend: Backend) -> None:
    pg_backend.execute(*PRODUCTS)
    add = query("UPDATE t SET v = v + ? WHERE id = ?", name="add")
    params = [(i, 1 + i % 4) for i in range(1, 61)]  # id 4 matches nothing: its count is 0
    ids = [f"e{i}" for i in range(60)]
    got = pg_backend.store.update(add, params, event_ids=ids, scope=SCOPE)
    assert got.counts == [0 if i % 4 == 3 else 1 for i in range(1, 61)] and got.replayed == 0
    assert pg_backend.fetch(_FUNCTIONS) == [(1,)]  # made once, on the connection that ran the batch
    assert pg_backend.fetch("SELECT count(*), sum(affected) FROM cep_ledger") == [(60, 45)]
    sums = {k: sum(v for v, i in params if i == k) for k in (1, 2, 3)}
    assert _rows(pg_backend) == [(k, sums[k], None) for k in (1, 2, 3)]
    # A replay finds its sampled keys in the ledger: nothing executes, the recorded counts return.
    again = pg_backend.store.update(add, params, event_ids=ids, scope=SCOPE)
    assert again.counts == got.counts and again.replayed == 60
    assert _rows(pg_backend) == [(k, sums[k], None) for k in (1, 2, 3)]


@pytest.mark.parametrize("ledgered", [False, True])
def test_an_integer_parameter_is_a_bigint_whether_or_not_another_event_of_the_batch_fails(
    pg_backend: Backend, ledgered: bool
) -> None:
    # psycopg alone sends 200 as a smallint, and `? * ?` overflowed at 40,000. The loop binds
    # bigint arrays; a batch with a failing event is redone statement by statement, which must
    # type the parameters the same way, or an event's fate would depend on its neighbours.
    pg_backend.execute(*PRODUCTS)
    times = query("UPDATE t SET v = ? * ? WHERE id = ?", name="times")

    def update(params: list[tuple[int, int, int]], ids: str) -> UpdateResult:
        if ledgered:
            return pg_backend.store.update(times, params, event_ids=list(ids), scope=SCOPE)
        return pg_backend.store.update(times, params)

    alone = update([(200, 200, 1)], "a")
    assert alone.counts == [1] and alone.errors == [None]
    # the second overflows the CHECK (4,000,000): dead-lettered, its neighbours applied
    got = update([(300, 300, 1), (2000, 2000, 2), (250, 250, 3)], "bcd")
    assert got.counts[0] == got.counts[2] == 1 and got.counts[1] is None
    assert "check" in (got.errors[1] or "").lower() and got.errors[0] is None and got.errors[2] is None
    assert _rows(pg_backend) == [(1, 90000, None), (2, 0, None), (3, 62500, None)]


def test_text_and_null_parameters_take_the_type_the_server_infers(pg_backend: Backend) -> None:
    pg_backend.execute(*PRODUCTS)
    set_day = query("UPDATE t SET d = ? WHERE id = ?", name="set_day")
    got = pg_backend.store.update(set_day, [("2026-12-01", 1), (None, 2), ("2026-02-28", 3)])
    assert got.counts == [1, 1, 1]
    assert _rows(pg_backend) == [(1, 0, "2026-12-01"), (2, 0, None), (3, 0, "2026-02-28")]
    bad = pg_backend.store.update(set_day, [("2026-12-02", 1), ("not a day", 2)])  # the event's data
    assert bad.counts == [1, None] and "invalid input syntax for type date" in (bad.errors[1] or "")
    assert _rows(pg_backend)[0] == (1, 0, "2026-12-02")


def test_text_for_an_array_column_is_parsed_by_the_server_as_for_one_event(pg_backend: Backend) -> None:
    # The server types that parameter text[]: no array of arrays is bound, the statements go one
    # by one with the text, which Postgres parses as an array, as it does for one event.
    pg_backend.execute(
        "CREATE TABLE tagged (id integer PRIMARY KEY, tags text[])", "INSERT INTO tagged VALUES (1), (2)"
    )
    tag = query("UPDATE tagged SET tags = ? WHERE id = ?", name="tag")
    got = pg_backend.store.update(tag, [("{a,b}", 1), ("{c}", 2)], event_ids=["a", "b"], scope=SCOPE)
    assert got.counts == [1, 1] and got.errors == [None, None]
    assert pg_backend.fetch("SELECT id, tags FROM tagged ORDER BY id") == [(1, ["a", "b"]), (2, ["c"])]


def test_a_statement_the_loop_cannot_hold_runs_event_by_event_and_is_not_looped_again(
    pg_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    # PL/pgSQL has no destination for a RETURNING: the first batch finds it out, and goes through
    # one statement per event, as every later batch of that query does.
    pg_backend.execute(*PRODUCTS)
    add = query("UPDATE t SET v = v + ? WHERE id = ? RETURNING id", name="add_returning")
    with caplog.at_level(logging.INFO, logger="paascep.stores"):
        first = pg_backend.store.update(add, [(5, 1), (6, 2)], event_ids=["a", "b"], scope=SCOPE)
        second = pg_backend.store.update(add, [(7, 1), (8, 9)], event_ids=["c", "d"], scope=SCOPE)
        replay = pg_backend.store.update(add, [(7, 1), (8, 9)], event_ids=["c", "d"], scope=SCOPE)
    assert (first.counts, second.counts, replay.counts, replay.replayed) == ([1, 1], [1, 0], [1, 0], 2)
    assert _rows(pg_backend) == [(1, 12, None), (2, 6, None), (3, 0, None)]
    notes = [r.getMessage() for r in caplog.records if "one by one" in r.getMessage()]
    assert len(notes) == 1 and "add_returning" in notes[0], notes


def test_a_batch_longer_than_the_statement_timeout_runs_event_by_event(pg_db: str) -> None:
    # The timeout bounds one statement: each event's, as the user set it. The loop is one
    # statement for the whole batch, so a batch that outlasts it is redone event by event.
    url = parse_store_url(pg_db + ("&" if "?" in pg_db else "?") + "statement_timeout_ms=300")
    store = SqlStore(url, "crm", retry=FAST_RETRY)
    backend = Backend("postgresql", url, store)
    try:
        backend.execute(*PRODUCTS)
        slow = query(
            "UPDATE t SET v = v + ? WHERE id = ? AND (SELECT pg_sleep(0.1)) IS NOT NULL", name="slow"
        )
        got = store.update(
            slow, [(1, 1), (2, 2), (3, 3), (4, 1), (5, 2)], event_ids=list("abcde"), scope=SCOPE
        )
        assert got.counts == [1] * 5 and got.errors == [None] * 5
        assert _rows(backend) == [(1, 5, None), (2, 7, None), (3, 3, None)]
    finally:
        store.close()
