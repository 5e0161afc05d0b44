"""What the SQL store facade (stores/sql/store.py) and its backends (postgres*.py, sqlite.py) share.

The facade imports its backends, and the backends import this module, never the facade: the
pieces they have in common live here, below both.

- `Row`, `DEFAULT_STATEMENT_TIMEOUT_MS`, and `SqlBackend`: what a backend offers the facade;
- `is_event_error`: which SQLSTATEs are caused by one event's data rather than by the statement;
- `isolate`: running a batch with the events that fail because of their own data left out;
- `MaterializePlan` / `materialize_plan`: the INSERT (upsert or append) a Materialize executes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from operators.graph import SqlQuery, Table
from stores.api import LedgerKey, MaterializeResult, UpdateResult
from stores.schema import sa_table, stored_name

Row = tuple[Any, ...]

DEFAULT_STATEMENT_TIMEOUT_MS = 30_000

# SQLSTATE classes of errors caused by one event's data: data exception (bad cast, overflow, too
# long), integrity constraint, triggered data change, WITH CHECK OPTION, PL/pgSQL RAISE (triggers).
EVENT_ERROR_CLASSES = frozenset({"22", "23", "27", "44", "P0"})


def is_event_error(sqlstate: str | None) -> bool:
    return sqlstate is not None and sqlstate[:2] in EVENT_ERROR_CLASSES


class SqlBackend(Protocol):
    """What `SqlStore` asks of a backend. A backend may also offer `read_columns` and
    `materialize_arrow` (Postgres does); the facade answers from `read` / `materialize` otherwise."""

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]: ...
    def update(
        self, query: SqlQuery, params: Sequence[Row], event_ids: Sequence[str] | None, scope: str | None
    ) -> UpdateResult: ...
    def materialize(
        self, table: Table, columns: Sequence[str], rows: Sequence[Row], ledger_key: LedgerKey | None
    ) -> MaterializeResult: ...
    def close(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# Per-event error isolation


def isolate(
    n: int,
    attempt: Callable[[int, int], list[int]],
    event_error: Callable[[Exception], str | None],
    *,
    known_failing: bool,
) -> tuple[list[int | None], list[str | None]]:
    """Run events 0..n-1 in order, leaving out the ones that fail because of their own data.

    `attempt(lo, hi)` runs events lo..hi-1 as one unit that either takes effect whole or not at all
    (a savepoint), returning their counts, or raises. `event_error(e)` is the message to report when
    `e` is a per-event error, None when it is not (then it propagates and the whole call fails).

    A failing range is split in halves, each tried in order: the state every event sees is that of
    the events before it that succeeded, exactly as if the events had been executed one by one with
    the failing ones skipped. A batch with f failing events costs about 2·f·log2(n) attempts, one
    round trip each, instead of n.
    """
    counts: list[int | None] = [None] * n
    errors: list[str | None] = [None] * n

    def run(lo: int, hi: int, failing: bool) -> None:
        if not failing:
            try:
                counts[lo:hi] = attempt(lo, hi)
                return
            except Exception as e:
                message = event_error(e)
                if message is None:
                    raise
                if hi - lo == 1:
                    errors[lo] = message
                    return
        mid = (lo + hi) // 2
        run(lo, mid, False)
        run(mid, hi, False)

    if n:
        run(0, n, known_failing and n > 1)
    return counts, errors


# ---------------------------------------------------------------------------------------------
# Materialize: the INSERT (upsert or append) for a table and a list of columns


@dataclass(frozen=True)
class MaterializePlan:
    table: sa.Table
    sql: str  # positional placeholders of the target driver (%s for psycopg, ? for sqlite3)
    order: tuple[int, ...]  # for each placeholder, the index of the value in a row
    columns: tuple[str, ...]  # for each placeholder, the stored column name


def materialize_plan(table: Table, columns: Sequence[str], dialect: str) -> MaterializePlan:
    """Compile the statement with SQLAlchemy's dialect-specific INSERT ... ON CONFLICT.

    The statement is compiled once and executed with the driver's executemany, so SQLAlchemy's
    per-row processing is not on the hot path. Duplicate keys within one batch are fine: each row
    is its own statement, so the last one wins, as if the events had arrived one by one.
    """
    t = sa_table(table)
    names = [stored_name(c) for c in columns]
    unknown = [c for c, n in zip(columns, names, strict=True) if n not in t.c]
    if unknown:
        raise ValueError(f"table {table.name} has no column(s) {', '.join(unknown)}")
    if len(set(names)) != len(names):
        raise ValueError(f"columns {list(columns)} name a column twice")
    pk = [c.name for c in t.primary_key.columns]
    missing = [k for k in pk if k not in names]
    if missing:
        raise ValueError(f"rows for table {table.name} lack its primary key column(s) {', '.join(missing)}")

    values: dict[Any, Any] = {t.c[n]: sa.bindparam(f"p{i}") for i, n in enumerate(names)}
    stmt, d = _insert(t, values, names, pk, dialect)
    compiled = stmt.compile(dialect=d)
    positions = compiled.positiontup or []
    order = tuple(int(name[1:]) for name in positions)
    if sorted(order) != list(range(len(names))):  # pragma: no cover - guards a SQLAlchemy change
        raise RuntimeError(f"unexpected bind parameters {positions} for {names}")
    return MaterializePlan(t, str(compiled), order, tuple(names[i] for i in order))


def _insert(
    t: sa.Table, values: dict[Any, Any], names: list[str], pk: list[str], dialect: str
) -> tuple[sa.Insert, sa.Dialect]:
    """The dialect's INSERT of `values`: with a primary key, ON CONFLICT (key) DO UPDATE the other
    columns (DO NOTHING when there are none); without one, a plain append."""
    d: sa.Dialect
    if dialect == "postgresql":
        d = postgresql.psycopg.dialect(paramstyle="format")
        pg = postgresql.insert(t).values(values)
        stmt: sa.Insert = pg
        if pk:
            rest = [n for n in names if n not in pk]
            stmt = (
                pg.on_conflict_do_update(index_elements=pk, set_={n: pg.excluded[n] for n in rest})
                if rest
                else pg.on_conflict_do_nothing(index_elements=pk)
            )
    else:
        d = sqlite.pysqlite.dialect()
        lite = sqlite.insert(t).values(values)
        stmt = lite
        if pk:
            rest = [n for n in names if n not in pk]
            stmt = (
                lite.on_conflict_do_update(index_elements=pk, set_={n: lite.excluded[n] for n in rest})
                if rest
                else lite.on_conflict_do_nothing(index_elements=pk)
            )
    return stmt, d
