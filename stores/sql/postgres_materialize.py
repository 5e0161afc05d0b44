"""Materialize on Postgres: the table checked or created once, then each batch by binary COPY.

The fast path writes the whole batch with COPY (stores/sql/postgres_copy.py: appends straight into
the table, upserts through a staging table). If the server refuses a row, the batch is redone row by
row inside one transaction with savepoints (`base.isolate`), and only the refused rows are left out.

Exactly-once (stores/ledger.py) with a ledger key: BEGIN, INSERT the batch's ledger row, COPY the
rows (appends) or COPY them into a staging table and upsert from it, COMMIT; a replay fails on the
ledger's key before any row is written, and returns what was recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg
import pyarrow as pa
import sqlalchemy as sa

from operators.graph import Table
from stores import arrow, ledger
from stores.api import LedgerKey, MaterializeResult
from stores.schema import declared_shape, existing_shape, schema_mismatch
from stores.sql import postgres_copy as pg_bulk
from stores.sql.base import MaterializePlan, Row, isolate, materialize_plan
from stores.sql.postgres_connection import PgConnections, event_failure, ledger_conflict
from stores.values import conform_decimals, pg_value

_CLAIM_BATCH = f"INSERT INTO {ledger.TABLE} (deployment, operator, key, affected) VALUES (%s, %s, %s, %s)"
_CLAIM_BATCH_NEW = _CLAIM_BATCH + " ON CONFLICT DO NOTHING RETURNING key"
_RECORD_BATCH = f"UPDATE {ledger.TABLE} SET affected = %s, error = %s WHERE deployment = %s AND operator = %s AND key = %s"


class PgMaterializer:
    """The Materialize batches of one store, with the statements of each (table, columns) pair,
    compiled once."""

    def __init__(self, db: PgConnections) -> None:
        self.db = db
        self._plans: dict[tuple[Table, tuple[str, ...]], MaterializePlan] = {}
        self._bulk_plans: dict[MaterializePlan, pg_bulk.BulkPlan] = {}

    def materialize(
        self, table: Table, columns: Sequence[str], rows: Sequence[Row], ledger_key: LedgerKey | None
    ) -> MaterializeResult:
        plan = self._plan(table, columns)
        if not rows:
            return MaterializeResult([])
        # numbers for a numeric column as Decimals of its scale (psycopg would not send a float
        # there); the server refuses those that do not fit, row by row
        rows, _ = conform_decimals(table, columns, rows)
        values = _driver_rows(plan, rows)
        bp = self._bulk_plan(plan)
        return self._write(
            plan, len(values), ledger_key, lambda conn: pg_bulk.write(conn, bp, values), lambda: values
        )

    def materialize_arrow(
        self, table: Table, columns: Sequence[str], data: pa.Table, ledger_key: LedgerKey | None
    ) -> MaterializeResult:
        """`materialize` for an Arrow batch (Spark's): encoded to binary COPY by Arrow kernels.
        Batches the encoder cannot take (a numeric column, a key twice) go the row way."""
        plan = self._plan(table, columns)
        if not data.num_rows:
            return MaterializeResult([])
        bp = self._bulk_plan(plan)
        payload = pg_bulk.encode_arrow(data, plan, bp) if pg_bulk.unique_keys(data, plan, bp) else None
        if payload is None:
            return self.materialize(table, columns, arrow.rows(data), ledger_key)
        return self._write(
            plan,
            data.num_rows,
            ledger_key,
            lambda conn: pg_bulk.write_encoded(conn, bp, payload),
            lambda: _driver_rows(plan, arrow.rows(data)),
        )

    def _write(
        self,
        plan: MaterializePlan,
        n: int,
        ledger_key: LedgerKey | None,
        fast: Callable[[psycopg.Connection[Any]], None],
        rows: Callable[[], list[Row]],
    ) -> MaterializeResult:
        what = f"materializing into {plan.table.name}"  # no row count: the same on both engines
        if ledger_key is None:
            return self.db.run(
                what,
                lambda conn: self._materialize(conn, plan, n, None, fast, rows),
                write=True,
                verify=not plan.table.primary_key.columns,  # appends must not be retried once sent
            )
        self.db.ensure_ledger()
        return self.db.run(
            what, lambda conn: self._materialize(conn, plan, n, ledger_key, fast, rows), write=True
        )

    def _materialize(
        self,
        conn: psycopg.Connection[Any],
        plan: MaterializePlan,
        n: int,
        key: LedgerKey | None,
        fast: Callable[[psycopg.Connection[Any]], None],
        rows: Callable[[], list[Row]],
    ) -> MaterializeResult:
        """`fast(conn)` writes the whole batch (pg_bulk); `rows()` gives it row by row for the
        path that isolates the rows the server refuses."""
        entry = ledger.batch_entry(key) if key is not None else None
        failing = False
        # Fast path (stores/sql/postgres_copy.py): the ledger claim and a COPY of the whole batch in one
        # transaction. COPY cannot run in pipeline mode, so this is a few round trips, not one.
        try:
            with conn.transaction():
                if entry is not None:
                    conn.execute(_CLAIM_BATCH, (*entry, n))
                fast(conn)
            return MaterializeResult([None] * n)
        except pg_bulk.TooManyGenerations:
            pass  # one key many times in the batch: row by row is cheaper, and ordered
        except psycopg.Error as e:
            if entry is not None and ledger_conflict(e):
                return _recorded_batch(conn, entry, n)
            if not event_failure(e):
                raise
            failing = True
        return self._row_by_row(conn, plan, n, entry, rows(), known_failing=failing)

    def _row_by_row(
        self,
        conn: psycopg.Connection[Any],
        plan: MaterializePlan,
        n: int,
        entry: tuple[str, str, str] | None,
        values: list[Row],
        *,
        known_failing: bool,
    ) -> MaterializeResult:
        """The batch one row at a time in one transaction, the rows the server refuses left out
        (savepoints, `base.isolate`), with the ledger claim of the batch when it has one."""
        cur = conn.cursor()

        def attempt(lo: int, hi: int) -> list[int]:
            with conn.transaction():
                cur.executemany(plan.sql, values[lo:hi])
            return [1] * (hi - lo)

        errors: list[str | None] = []
        claimed = True
        with conn.pipeline(), conn.transaction():
            if entry is not None:
                claimed = bool(conn.execute(_CLAIM_BATCH_NEW, (*entry, n)).fetchall())
            if claimed:
                what = f"table {plan.table.name}"
                _, errors = isolate(n, attempt, self.db.event_error(what), known_failing=known_failing)
                if entry is not None:
                    ok = sum(e is None for e in errors)
                    conn.execute(_RECORD_BATCH, (ok, ledger.errors_json(errors), *entry))
        if not claimed:
            assert entry is not None
            return _recorded_batch(conn, entry, n)
        return MaterializeResult(errors)

    def _bulk_plan(self, plan: MaterializePlan) -> pg_bulk.BulkPlan:
        bp = self._bulk_plans.get(plan)
        if bp is None:
            bp = self._bulk_plans[plan] = pg_bulk.bulk_plan(plan)
        return bp

    def _plan(self, table: Table, columns: Sequence[str]) -> MaterializePlan:
        key = (table, tuple(columns))
        plan = self._plans.get(key)
        if plan is None:
            try:
                plan = materialize_plan(table, columns, "postgresql")
            except ValueError as e:
                raise self.db.query_error(str(e)) from None
            self._ensure_table(table, plan.table)
            self._plans[key] = plan
        return plan

    def _ensure_table(self, table: Table, t: sa.Table) -> None:
        """Create the table when missing; refuse an existing one that differs. Never ALTER."""
        engine = self.db.ddl_engine()
        want = declared_shape(t, "postgresql")
        have = None
        for attempt in (1, 2):
            try:
                with engine.begin() as conn:
                    have = existing_shape(conn, t.name)
                    if have is None:
                        t.create(conn)
                        return
                break
            except (sa.exc.IntegrityError, sa.exc.ProgrammingError) as e:
                if attempt == 1:  # maybe another process created it at the same moment: look again
                    continue
                raise self.db.error(e, f"creating table {table.name}") from e
            except sa.exc.SQLAlchemyError as e:
                raise self.db.error(e, f"checking table {table.name}") from e
        if have is not None and not have.same_as(want):
            raise schema_mismatch(t, have, want, self.db.name, self.db.url)


def _recorded_batch(conn: psycopg.Connection[Any], entry: tuple[str, str, str], n: int) -> MaterializeResult:
    row = conn.execute(
        f"SELECT error FROM {ledger.TABLE} WHERE deployment = %s AND operator = %s AND key = %s", entry
    ).fetchone()
    return MaterializeResult(ledger.errors_from_json(row[0] if row else None, n), replayed=True)


def _driver_rows(plan: MaterializePlan, rows: Sequence[Row]) -> list[Row]:
    """The rows in placeholder order with naive datetimes taken as UTC, built column by column:
    transposing with zip runs in C, where a tuple per row built in Python cost more than the COPY."""
    columns = list(zip(*rows, strict=True))
    out = []
    for k, i in enumerate(plan.order):
        column = columns[i]
        if isinstance(plan.table.c[plan.columns[k]].type, sa.DateTime) and any(
            isinstance(v, datetime) and v.tzinfo is None for v in column
        ):
            column = tuple(pg_value(v) for v in column)
        out.append(column)
    return list(zip(*out, strict=True))
