"""The interface both executors use to reach data stores.

The reference executor calls these with one event at a time (lists of length one); the Spark
deployer calls them with whole batches. Implementations must give the same result either way:
per-event semantics, batched execution (docs/architecture.md, decision 4 and 5).

Values cross this boundary as Python objects: int, float, Decimal, str, bool, aware UTC datetime,
or None. Parameters are always bound by the driver, never spliced into SQL text.

Writes are exactly-once in effect when the caller identifies them (docs/architecture.md, decision 6, see
stores/ledger.py): `update` with `event_ids` and `scope`, `materialize` with `ledger_key`. Without
them a call simply executes, as the reference executor needs.

A statement that fails for one event (a constraint, a bad cast: the event's own data) does not fail
the others: the results say which events failed and why, and the caller dead-letters them. Errors
that are not about one event (bad SQL, a missing table, the server gone after the retries) are
raised as `StoreError`s, and nothing of the call took effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from operators.graph import SqlQuery, Table

Row = tuple[Any, ...]
# (deployment, operator id, Spark batch id): one Materialize batch of one deployment.
LedgerKey = tuple[str, str, int]


@dataclass(frozen=True)
class UpdateResult:
    """Per event, in order: the affected-row count, or None and the (redacted) reason it failed.

    `replayed` counts the events found in the ledger: not executed again, their first result returned.
    """

    counts: list[int | None]
    errors: list[str | None]
    replayed: int = 0

    @property
    def failed(self) -> list[int]:
        return [i for i, e in enumerate(self.errors) if e is not None]


@dataclass(frozen=True)
class ReadColumns:
    """The result rows of a batched SELECT, column by column (what the Spark deployer turns into
    Arrow without a Python object per row).

    Row i belongs to the event (parameter tuple) `event[i]`, counted from 0; rows come in event order
    and, within an event, in the query's order. `columns[j][i]` is the j-th result value of row i,
    coerced to the query's RETURNS types as `read` does. With `outer`, an event without result rows
    has one row of Nones.
    """

    event: list[int]
    columns: list[list[Any]]


def rows_of(columns: Sequence[Sequence[Any]], n: int) -> list[Row]:
    """The `n` parameter tuples of a batch given column by column (`()` each without parameters)."""
    return list(zip(*columns, strict=True)) if columns else [()] * n


def columns_of(results: Sequence[Sequence[Row]], width: int, outer: bool) -> ReadColumns:
    """`read`'s per-event result lists as `ReadColumns` of `width` columns (short rows padded)."""
    event: list[int] = []
    columns: list[list[Any]] = [[] for _ in range(width)]
    for e, found in enumerate(results):
        if not found:
            if not outer:
                continue
            found = [(None,) * width]
        for row in found:
            event.append(e)
            for j in range(width):
                columns[j].append(row[j] if j < len(row) else None)
    return ReadColumns(event, columns)


@dataclass(frozen=True)
class MaterializeResult:
    """Per row, in order: None when stored, else the (redacted) reason it was not.

    `replayed`: the ledger key was already there, so nothing was written now; `errors` are then the
    ones recorded the first time, so a replayed batch dead-letters the same rows again.
    """

    errors: list[str | None] = field(default_factory=list)
    replayed: bool = False

    @property
    def failed(self) -> list[int]:
        return [i for i, e in enumerate(self.errors) if e is not None]


class Stores(Protocol):
    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        """For each parameter tuple, in order, the result rows of the SELECT (possibly none)."""
        ...

    def update(
        self,
        query: SqlQuery,
        params: Sequence[Row],
        *,
        event_ids: Sequence[str] | None = None,
        scope: str | None = None,
    ) -> UpdateResult:
        """Execute the statement once per parameter tuple, in order, in one transaction.

        With `event_ids` (one per tuple) and `scope` ("deployment/operator", see `ledger.scope`), an
        event already executed under that scope is not executed again: its first result is returned.
        """
        ...

    def materialize(
        self,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[Row],
        *,
        ledger_key: LedgerKey | None = None,
    ) -> MaterializeResult:
        """Store rows (values for `columns`, a subset of the table's) upserting by primary key.

        With `ledger_key`, a batch already stored under that key is skipped.
        """
        ...

    def close(self) -> None: ...
