"""The interface both executors use to reach data stores.

The reference executor calls these with one event at a time (lists of length one); the Spark
deployer calls them with whole batches. Implementations must give the same result either way:
per-event semantics, batched execution (DESIGN.md decisions 4 and 5).

Values cross this boundary as Python objects: int, float, Decimal, str, bool, aware UTC datetime,
or None. Parameters are always bound by the driver, never spliced into SQL text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from operators.graph import SqlQuery, Table

Row = tuple[Any, ...]


class Stores(Protocol):
    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        """For each parameter tuple, in order, the result rows of the SELECT (possibly none)."""
        ...

    def update(self, query: SqlQuery, params: Sequence[Row]) -> list[int]:
        """Execute the statement once per parameter tuple, in order; the affected-row counts."""
        ...

    def materialize(self, table: Table, columns: Sequence[str], rows: Sequence[Row]) -> None:
        """Store rows (values for `columns`, a subset of the table's) upserting by primary key."""
        ...

    def close(self) -> None: ...
