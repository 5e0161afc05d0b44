"""What a graph refers to besides its nodes: the declarations of a script (windows, data stores, SQL
query variables, tables), as immutable values."""

from __future__ import annotations

from dataclasses import dataclass

from operators.datatypes import Schema
from operators.expr import Expr


@dataclass(frozen=True)
class Window:
    """TUPLE (size/advance in events), TIME (size/advance in milliseconds of event time) or BATCH."""

    kind: str  # "tuple" | "time" | "batch"
    size: int = 0
    advance: int = 0
    start: Expr | None = None  # BATCH: opens a window when true for an event
    stop: Expr | None = None  # BATCH: closes (and fires) the window when true for an event
    name: str | None = None

    def describe(self) -> str:
        if self.kind == "batch":
            assert self.start is not None and self.stop is not None
            return f"BATCH START {self.start.to_cpl()} STOP {self.stop.to_cpl()}"
        if self.kind == "time":
            return f"TIME SIZE {format_ms(self.size)} ADVANCE {format_ms(self.advance)}"
        return f"TUPLE SIZE {self.size} ADVANCE {self.advance}"


_UNITS = (("DAY", 86_400_000), ("HOUR", 3_600_000), ("MINUTE", 60_000), ("SECOND", 1000))


def format_ms(ms: int) -> str:
    if ms == 0:
        return "0 SECONDS"
    for unit, n in _UNITS:
        if ms % n == 0:
            k = ms // n
            return f"{k} {unit}{'S' if k != 1 else ''}"
    return f"{ms} MILLISECOND{'S' if ms != 1 else ''}"


@dataclass(frozen=True)
class DataStore:
    name: str
    type: str  # "postgresql" | "sqlite" | "redis"


@dataclass(frozen=True)
class SqlQuery:
    """A `CREATE SQLQUERY` variable: SQL text with `?` parameters, run against one data store."""

    name: str
    store: str
    text: str
    kind: str  # "select" | "insert" | "update" | "delete"
    param_count: int
    returns: Schema | None = None  # declared result columns (RETURNS), when given
    cache_rows: int | None = None
    cache_ttl_ms: int | None = None

    @property
    def is_read(self) -> bool:
        return self.kind == "select"


@dataclass(frozen=True)
class Table:
    """A `CREATE TABLE … IN store` declaration that results are materialized into."""

    name: str
    store: str
    columns: Schema
    primary_key: tuple[str, ...] = ()
    ttl_ms: int | None = None
