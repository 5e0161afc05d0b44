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
raised as `StoreError`s, and nothing of the call took effect: the engines stop the run with them.
`read` of one event raises its event's error too, marked `about_event` (stores/errors.py);
`read_columns`, the batched read, reports such events in `ReadColumns.errors` (`split_reads`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from operators.graph import SqlQuery, Table
from operators.results import column_count_reason
from stores.errors import StoreError

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

    `errors`: the events that have no rows because the store refused them (event → the reason, as
    `str` of its StoreError): a read that failed because of that event's data (`about_event`), or
    result rows with another number of columns than the `width` asked for (the ON SQL names).
    """

    event: list[int]
    columns: list[list[Any]]
    errors: dict[int, str] = field(default_factory=dict)


def rows_of(columns: Sequence[Sequence[Any]], n: int) -> list[Row]:
    """The `n` parameter tuples of a batch given column by column (`()` each without parameters)."""
    return list(zip(*columns, strict=True)) if columns else [()] * n


def columns_of(results: Sequence[Sequence[Row]], query: SqlQuery, width: int, outer: bool) -> ReadColumns:
    """`read`'s per-event result lists as `ReadColumns` of `width` columns. An event whose rows have
    another number of columns is refused, with the reason the reference executor gives it
    (operators.results.column_count_reason): its rows are not cut or padded into a shape they do
    not have. An event without rows has none to check, and with `outer` gets its row of Nones."""
    event: list[int] = []
    columns: list[list[Any]] = [[] for _ in range(width)]
    errors: dict[int, str] = {}
    for e, found in enumerate(results):
        if not found:
            if not outer:
                continue
            found = [(None,) * width]
        bad = next((len(row) for row in found if len(row) != width), None)
        if bad is not None:
            errors[e] = column_count_reason(query.name, bad, width)
            continue
        for row in found:
            event.append(e)
            for j in range(width):
                columns[j].append(row[j])
    return ReadColumns(event, columns, errors)


def split_reads(n: int, width: int, attempt: Callable[[int, int], ReadColumns]) -> ReadColumns:
    """A batched read of events 0..n-1 with the events the store refuses for their own data left
    out and reported, so that one bad event does not fail its batch (the reference executor reads
    one event at a time and dead-letters just that one).

    `attempt(lo, hi)` reads events lo..hi-1 (its result counts them from 0). A StoreError that is
    about one event (`about_event`: a bad cast, a division by zero in the query...) fails the whole
    batched query; the range is then split in halves, each read on its own, down to the single
    events that fail: about 2·f·log2(n) reads for f such events, and nothing more when none fails.
    Reads change nothing, so a failed attempt leaves nothing to undo. Any other StoreError is raised.
    """
    parts: list[tuple[int, ReadColumns]] = []
    errors: dict[int, str] = {}

    def run(lo: int, hi: int) -> None:
        try:
            parts.append((lo, attempt(lo, hi)))
            return
        except StoreError as e:
            if not e.about_event:
                raise
            if hi - lo == 1:
                errors[lo] = str(e)
                return
        mid = (lo + hi) // 2
        run(lo, mid)
        run(mid, hi)

    if n:
        run(0, n)
    if len(parts) == 1 and not errors:
        return parts[0][1]  # the usual case: the batch read whole
    event: list[int] = []
    columns: list[list[Any]] = [[] for _ in range(width)]
    for lo, part in parts:  # in event order: the halves are read left to right
        event += [lo + e for e in part.event]
        for j, values in enumerate(part.columns):
            columns[j] += values
        errors.update({lo + e: why for e, why in part.errors.items()})
    return ReadColumns(event, columns, dict(sorted(errors.items())))


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
