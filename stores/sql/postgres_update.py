"""UpdateSQL on Postgres: a batch of statements in one transaction, ledgered or not.

A batch is first one call of a server-side loop over its events, with the ledger write in the same
statement (stores/sql/postgres_update_loop.py); what the loop cannot do goes the way below, one
pipelined statement per event, which is also how failing events are isolated.

psycopg's `executemany(..., returning=True)` keeps one result per execution, and `nextset()` walks
them, so each event's `rowcount` is read back from a single pipelined batch.

Exactly-once (stores/ledger.py), round trips per batch with event ids: [BEGIN, look whether a sample
of the ids is in cep_ledger] then [the statements] then [INSERT every id with its count, COMMIT]. If
an id is already there (a replay), or the INSERT fails on the ledger's key (a second transaction
with the same ids committed first: its statements are rolled back with it), the batch is redone
claiming with ON CONFLICT DO NOTHING: only the claimed events execute, the others return what the
ledger recorded.

Per-event errors: the fast path runs the batch as one unit; if an event's data makes a statement
fail, the batch is redone inside the same transaction with savepoints (`base.isolate`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.numeric import Int8Dumper

from operators.graph import SqlQuery
from operators.sqltext import to_driver_placeholders
from stores import ledger
from stores.api import UpdateResult
from stores.errors import StoreQueryError
from stores.sql.base import Row, isolate
from stores.sql.postgres_connection import PgConnections, event_failure, ledger_conflict
from stores.sql.postgres_read import PgReader
from stores.sql.postgres_update_loop import LedgerArgs, UpdateLoops
from stores.values import pg_array_literal, pg_text_array_literal, pg_value

_CLAIM_ALL = (
    f"INSERT INTO {ledger.TABLE} (deployment, operator, key) SELECT %s, %s, k FROM unnest(%s::text[]) AS u(k)"
)
_CLAIM_NEW = _CLAIM_ALL + " ON CONFLICT DO NOTHING RETURNING key"
_RECORD_EVENTS = (
    f"UPDATE {ledger.TABLE} AS l SET affected = u.n, error = u.e"
    " FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS u(k, n, e)"
    " WHERE l.deployment = %s AND l.operator = %s AND l.key = u.k"
)
# One index probe per key, whatever the planner believes about the ledger's size: `key = ANY(...)
# LIMIT 1` made it pick a sequential scan that compared every ledger row with every key (a fresh
# ledger has no statistics, and LIMIT favours plans that start fast), 30 s for 10,000 keys once the
# ledger held a few hundred thousand rows. The LIMIT inside LATERAL keeps the loop nested.
_ANY_RECORDED = (
    "SELECT 1 FROM unnest(%s::text[]) AS u(k) CROSS JOIN LATERAL"
    f" (SELECT 1 FROM {ledger.TABLE} l WHERE l.deployment = %s AND l.operator = %s AND l.key = u.k LIMIT 1) x"
    " LIMIT 1"
)
_RECORD_NEW = (
    f"INSERT INTO {ledger.TABLE} (deployment, operator, key, affected)"
    " SELECT %s, %s, k, n FROM unnest(%s::text[], %s::bigint[]) AS u(k, n)"
)
_RECORDED = (
    "SELECT u.k, x.affected, x.error FROM unnest(%s::text[]) AS u(k) CROSS JOIN LATERAL"
    f" (SELECT affected, error FROM {ledger.TABLE} l"
    " WHERE l.deployment = %s AND l.operator = %s AND l.key = u.k LIMIT 1) x"
)

log = logging.getLogger("paascep.stores")

SAMPLED_KEYS = 16  # ledger keys a ledgered update looks up before its fast path (see _update_ledgered)


class PgUpdater:
    """The UpdateSQL statements of one store."""

    def __init__(self, db: PgConnections, reader: PgReader) -> None:
        self.db = db
        self.loops = UpdateLoops(reader)

    def update(
        self, query: SqlQuery, params: Sequence[Row], event_ids: Sequence[str] | None, scope: str | None
    ) -> UpdateResult:
        if not params:
            return UpdateResult([], [])
        text = to_driver_placeholders(query.text, "pyformat")
        rows = [tuple(pg_value(v) for v in p) for p in params]
        what = f"query {query.name}"  # no batch size: the same on both engines, whatever the batches
        if event_ids is None or scope is None:
            return self.db.run(
                what, lambda conn: self._update_plain(conn, query, text, rows), write=True, verify=True
            )
        sc = ledger.parse_scope(scope)
        keys = [ledger.entry_key(i) for i in event_ids]
        self.db.ensure_ledger()
        return self.db.run(
            what, lambda conn: self._update_ledgered(conn, query, text, rows, sc, keys), write=True
        )

    def _update_plain(
        self, conn: psycopg.Connection[Any], query: SqlQuery, text: str, rows: list[Row]
    ) -> UpdateResult:
        try:
            looped, looped_counts = self._looped(conn, query, rows, None)
            if looped and looped_counts is not None:
                return UpdateResult([*looped_counts], [None] * len(rows))
            cur = _cursor(conn)
            with conn.pipeline(), conn.transaction():
                cur.executemany(text, rows, returning=True)
            return UpdateResult([*_counts(cur, len(rows), query)], [None] * len(rows))
        except psycopg.Error as e:
            if not event_failure(e):
                raise
        with conn.pipeline(), conn.transaction():
            counts, errors = self._isolate(
                conn, query, text, rows, list(range(len(rows))), known_failing=True
            )
        return UpdateResult(counts, errors)

    def _update_ledgered(
        self,
        conn: psycopg.Connection[Any],
        query: SqlQuery,
        text: str,
        rows: list[Row],
        sc: ledger.Scope,
        keys: list[str],
    ) -> UpdateResult:
        # Fast path: no event of the batch is in the ledger yet, and none fails. The ledger rows are
        # written once, with their counts, after the statements: half the ledger writes of claiming
        # first and recording after. A concurrent transaction with the same ids (another query
        # recomputing the same batch) still cannot apply them twice: its INSERT into the ledger
        # waits for ours, then fails on the key, and everything it did rolls back. The look-up
        # first keeps replays and recomputations from executing the statements only to roll back;
        # it asks about a sample of the keys (SAMPLED_KEYS), not all of them: a replayed or
        # recomputed batch is found by any one of its keys, and a batch that shares only some keys
        # with the ledger the sample misses still fails on the INSERT (looking up every key was a
        # large part of the ledger's server time).
        retry_failing = False
        try:
            result = self._apply_unrecorded(conn, query, text, rows, sc, keys)
            if result is not None:
                return result
        except psycopg.Error as e:
            if not (ledger_conflict(e) or event_failure(e)):
                raise
            retry_failing = not ledger_conflict(e)
        # A replay, an id twice in the batch, or an event that fails: claim what is not claimed yet,
        # execute those (isolating failures), return the ledger's record for the others.
        return self._claim_and_apply(conn, query, text, rows, sc, keys, known_failing=retry_failing)

    def _apply_unrecorded(
        self,
        conn: psycopg.Connection[Any],
        query: SqlQuery,
        text: str,
        rows: list[Row],
        sc: ledger.Scope,
        keys: list[str],
    ) -> UpdateResult | None:
        """The fast path of `_update_ledgered`; None when a sampled key is in the ledger already."""
        n = len(rows)
        key_array = pg_text_array_literal(keys)
        sample = pg_text_array_literal(_sample(keys, SAMPLED_KEYS))
        looped, counts = self._looped(
            conn, query, rows, LedgerArgs(sc.deployment, sc.operator, key_array, sample)
        )
        if looped:
            return None if counts is None else UpdateResult([*counts], [None] * n)
        cur = _cursor(conn)
        with conn.pipeline() as p, conn.transaction():
            seen = conn.execute(_ANY_RECORDED, (sample, sc.deployment, sc.operator))
            p.sync()
            if seen.fetchone() is None:
                cur.executemany(text, rows, returning=True)
                p.sync()
                counts = _counts(cur, n, query)
                conn.execute(_RECORD_NEW, (sc.deployment, sc.operator, key_array, pg_array_literal(counts)))
                return UpdateResult([*counts], [None] * n)
        return None

    def _looped(
        self, conn: psycopg.Connection[Any], query: SqlQuery, rows: list[Row], led: LedgerArgs | None
    ) -> tuple[bool, list[int] | None]:
        """(True, the loop's outcome: counts, or None when a sampled key is recorded), or (False, None)
        when the batch is for `executemany`. An event that fails, a ledger key taken, a lost
        connection: raised, as `executemany` raises them."""
        try:
            call = self.loops.prepare(conn, query, rows)
            return (False, None) if call is None else (True, call.run(conn, led))
        except psycopg.Error as e:
            if not self.loops.give_up(query, e):
                raise
            log.info(
                "query %s: its statements are sent one by one (the server-side loop cannot run it: %s)",
                query.name,
                self.db.scrub(str(e)).splitlines()[0] if str(e) else type(e).__name__,
            )
            return False, None

    def _claim_and_apply(
        self,
        conn: psycopg.Connection[Any],
        query: SqlQuery,
        text: str,
        rows: list[Row],
        sc: ledger.Scope,
        keys: list[str],
        *,
        known_failing: bool,
    ) -> UpdateResult:
        """Claim the keys not in the ledger yet and execute their events, isolating failures; the
        other events get what the ledger recorded for them."""
        first = ledger.first_occurrences(keys)
        with conn.pipeline() as p, conn.transaction():
            claimed = {r[0] for r in conn.execute(_CLAIM_NEW, (sc.deployment, sc.operator, list(first)))}
            todo = [i for k, i in first.items() if k in claimed]
            got_counts, got_errors = self._isolate(conn, query, text, rows, todo, known_failing=known_failing)
            done = {keys[i]: (got_counts[j], got_errors[j]) for j, i in enumerate(todo)}
            if done:
                conn.execute(
                    _RECORD_EVENTS,
                    (
                        list(done),
                        [c for c, _ in done.values()],
                        [e for _, e in done.values()],
                        sc.deployment,
                        sc.operator,
                    ),
                )
            others = [k for k in first if k not in claimed]
            if others:
                for k, count, error in conn.execute(
                    _RECORDED, (others, sc.deployment, sc.operator)
                ).fetchall():
                    done[k] = (count, error)
            p.sync()
        counts_out: list[int | None] = []
        errors_out: list[str | None] = []
        for k in keys:
            count, error = done.get(k, (None, None))
            counts_out.append(count)
            errors_out.append(error)
        return UpdateResult(counts_out, errors_out, replayed=len(rows) - len(todo))

    def _isolate(
        self,
        conn: psycopg.Connection[Any],
        query: SqlQuery,
        text: str,
        rows: list[Row],
        todo: list[int],
        *,
        known_failing: bool,
    ) -> tuple[list[int | None], list[str | None]]:
        """Execute rows[todo], in order, inside the current transaction, isolating failing events."""
        if not todo:
            return [], []
        cur = _cursor(conn)
        chosen = [rows[i] for i in todo]

        def attempt(lo: int, hi: int) -> list[int]:
            with conn.transaction():  # a savepoint: rolled back if the chunk fails
                cur.executemany(text, chosen[lo:hi], returning=True)
            return _counts(cur, hi - lo, query)

        return isolate(
            len(chosen), attempt, self.db.event_error(f"query {query.name}"), known_failing=known_failing
        )


def _cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """A cursor that sends every int as bigint, as the server-side loop binds them (and ReadSQL):
    psycopg's own choice, the smallest type that holds the value, made `? * ?` overflow a smallint
    at 200 * 200, and an event's fate would depend on whether another event of its batch failed
    (the failing batch is redone here, the others run in the loop)."""
    cur = conn.cursor()
    cur.adapters.register_dumper(int, Int8Dumper)
    return cur


def _counts(cur: psycopg.Cursor[Any], n: int, query: SqlQuery) -> list[int]:
    counts = [cur.rowcount]
    while cur.nextset():
        counts.append(cur.rowcount)
    if len(counts) != n:  # pragma: no cover - would be a psycopg change
        raise StoreQueryError(f"query {query.name}: {len(counts)} results for {n} events")
    return counts


def _sample(values: list[str], k: int) -> list[str]:
    """At most k of the values, evenly spread, the first and the last among them."""
    n = len(values)
    if n <= k:
        return values
    return [values[round(i * (n - 1) / max(k - 1, 1))] for i in range(k)]
