"""What a graph refers to besides its nodes: the declarations of a script (windows, data stores, SQL
query variables, tables), as immutable values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from operators.datatypes import DataType, Schema
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
class ResultColumn:
    """One result column of a SELECT as its data store describes it (stores/describe.py)."""

    name: str  # as the database names it (`?column?` for an expression on PostgreSQL)
    type: DataType  # the CPL type its values are read as
    source: str  # the database's own type, e.g. "int4", "numeric(10,2)", "INTEGER"; "" when it has none
    # Every value the store's driver returns for it is a value of `type` (PostgreSQL's int4 read as
    # integer), so reading it can never dead-letter an event: one that does not fit means the column's
    # type changed since, and stops the run (operators.analysis.vouched_results).
    exact: bool = False


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
    # What the store said the SELECT returns when the script was compiled with its stores bound
    # (cpl.compiler.compile_script's `describe`); None when it was not asked or could not say.
    described: tuple[ResultColumn, ...] | None = None

    @property
    def is_read(self) -> bool:
        return self.kind == "select"

    @property
    def result_types(self) -> tuple[DataType, ...] | None:
        """The types of the result columns: RETURNS when declared (it wins), else the store's
        description, else None (unknown: the compiler reads them as varchar)."""
        if self.returns is not None:
            return tuple(f.type for f in self.returns)
        if self.described is not None:
            return tuple(c.type for c in self.described)
        return None


class DescribeError(Exception):
    """A data store could not describe a query's result columns; the message says why (redacted)."""


class DescribeQuery(Protocol):
    """What the compiler asks of the bound data stores: the result columns of the SELECT `query`
    against its store `store`, or DescribeError saying why they cannot be known. The compiler
    depends on this protocol only, never on a store (stores/describe.py implements it)."""

    def __call__(self, query: SqlQuery, store: DataStore) -> tuple[ResultColumn, ...]: ...


@dataclass(frozen=True)
class Table:
    """A `CREATE TABLE … IN store` declaration that results are materialized into."""

    name: str
    store: str
    columns: Schema
    primary_key: tuple[str, ...] = ()
    ttl_ms: int | None = None
