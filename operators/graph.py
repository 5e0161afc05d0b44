"""The operator graph: the paper's algebraic, database and materialization operators as immutable nodes.

A compiled script is a `Graph`: an acyclic list of nodes in topological order. Every node knows its
inputs (as `Port`s: a node id and, for MultiFilter, which of its outputs) and its output schema,
which is derived from its inputs when the node is built, so a graph can never disagree with itself.
Both executors (the reference executor in `deployer.local.executor` and the Spark deployer) consume this
structure and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from operators.datatypes import T_BIGINT, T_TIMESTAMP, Field, Schema
from operators.declarations import DataStore, SqlQuery, Table, Window, format_ms
from operators.expr import Agg, Expr
from operators.node import NamedExpr as NamedExpr
from operators.node import Node, Port, _schema_of, _show
from operators.output_node import OutputRate
from operators.pattern_node import MATCH_TIME as MATCH_TIME
from operators.pattern_node import Pattern
from operators.triggers import Trigger

# Names of the window bounds in an Aggregate's row; not valid CPL names, so they cannot clash.
WINDOW_START = "$window_start"
WINDOW_END = "$window_end"

# ---------------------------------------------------------------------------------------------
# Nodes.


@dataclass(frozen=True, kw_only=True)
class Source(Node):
    stream: str
    source_schema: Schema
    watermark_ms: int | None = None
    # A trigger's stream (CREATE TRIGGER): its events are the engine's ticks, not bound input.
    trigger: Trigger | None = None

    @property
    def schema(self) -> Schema:
        return self.source_schema

    def params(self) -> dict[str, object]:
        p: dict[str, object] = {"stream": self.stream}
        if self.trigger is not None:
            p["trigger"] = self.trigger.describe()
        if self.event_time:
            p["timestamp_by"] = self.event_time
        if self.watermark_ms is not None:
            p["watermark"] = format_ms(self.watermark_ms)
        return p


@dataclass(frozen=True, kw_only=True)
class Map(Node):
    input_schema: Schema
    projections: tuple[NamedExpr, ...]

    @property
    def schema(self) -> Schema:
        return _schema_of(self.projections)

    def params(self) -> dict[str, object]:
        return {"project": _show(self.projections)}


@dataclass(frozen=True, kw_only=True)
class Filter(Node):
    input_schema: Schema
    predicate: Expr

    @property
    def schema(self) -> Schema:
        return self.input_schema

    def params(self) -> dict[str, object]:
        return {"where": self.predicate.to_cpl()}


@dataclass(frozen=True, kw_only=True)
class MultiFilter(Node):
    """One pass over the input; output i carries the events for which predicates[i] holds."""

    input_schema: Schema
    predicates: tuple[Expr, ...]

    @property
    def schema(self) -> Schema:
        return self.input_schema

    @property
    def outputs(self) -> int:
        return len(self.predicates)

    def params(self) -> dict[str, object]:
        return {"where": [p.to_cpl() for p in self.predicates]}


@dataclass(frozen=True, kw_only=True)
class Union(Node):
    input_schema: Schema

    @property
    def schema(self) -> Schema:
        return self.input_schema

    def params(self) -> dict[str, object]:
        return {"inputs": len(self.inputs)}


@dataclass(frozen=True, kw_only=True)
class Aggregate(Node):
    """Per group, a window over the input; when it is full, emit the aggregates, then slide.

    `keys` and `aggs` are evaluated over input events. `having` and `projections` are evaluated over
    the aggregated row: the key values, then the aggregate values, then, for a TIME window, the
    window's start and end (what `window_start()` and `window_end()` read), in that order.
    """

    input_schema: Schema
    window: Window
    keys: tuple[NamedExpr, ...]
    aggs: tuple[NamedExpr, ...]  # each expr is an `Agg`
    having: Expr | None
    projections: tuple[NamedExpr, ...]

    def __post_init__(self) -> None:
        for a in self.aggs:
            if not isinstance(a.expr, Agg):
                raise TypeError(f"Aggregate.aggs holds {type(a.expr).__name__}, not Agg")

    @property
    def schema(self) -> Schema:
        return _schema_of(self.projections)

    @property
    def row_schema(self) -> Schema:
        """The schema of the aggregated row that `having` and `projections` read."""
        fields = _schema_of(self.keys + self.aggs).fields
        if self.window.kind == "time":
            fields += (Field(WINDOW_START, T_TIMESTAMP, False), Field(WINDOW_END, T_TIMESTAMP, False))
        return Schema(fields)

    def params(self) -> dict[str, object]:
        p: dict[str, object] = {
            "window": self.window.describe(),
            "group_by": [k.expr.to_cpl() for k in self.keys],
        }
        if self.having is not None:
            p["having"] = self._inline_aggs(self.having.to_cpl())
        p["project"] = [self._inline_aggs(x) for x in _show(self.projections)]
        return p

    def _inline_aggs(self, text: str) -> str:
        """Show `sum(cost)` where the aggregated row has its placeholder name, for people reading plans."""
        for a in reversed(self.aggs):  # $agg10 before $agg1
            text = text.replace(a.name, a.expr.to_cpl())
        return text.replace(WINDOW_START, "window_start()").replace(WINDOW_END, "window_end()")


@dataclass(frozen=True, kw_only=True)
class Join(Node):
    """Two inputs, each with a TIME window; `predicate` and `projections` read (left, right) pairs.

    An event from one side is matched against the events of the other side that are in that side's
    window at the event's time: for sizes Sl and Sr, a pair (l, r) can match when
    r.ts - Sl < l.ts < r.ts + Sr (event time). Each matching pair is emitted once.
    """

    left_schema: Schema
    right_schema: Schema
    left_window: Window
    right_window: Window
    left_time: str
    right_time: str
    predicate: Expr
    projections: tuple[NamedExpr, ...]

    @property
    def schema(self) -> Schema:
        return _schema_of(self.projections)

    def params(self) -> dict[str, object]:
        return {
            "windows": [self.left_window.describe(), self.right_window.describe()],
            "on": self.predicate.to_cpl(),
            "project": _show(self.projections),
        }


@dataclass(frozen=True, kw_only=True)
class ReadSQL(Node):
    """Per event: bind `params`, run the SELECT, emit the event extended by each result row.

    The output is the input's fields followed by `result_fields`. With `outer`, an event whose
    query returns no row is emitted once with NULL result fields. Each result value becomes a value
    of its field's type by `operators.results`; an event with a value that does not fit is
    dead-lettered instead (`operators.analysis.unfit_results` says which fields may not fit), as is
    an event whose read the store refuses for its data; a store error of any other kind stops the run
    (docs/guarantees.md, "Data store errors").
    """

    input_schema: Schema
    query: SqlQuery
    alias: str
    args: tuple[Expr, ...]
    result_fields: tuple[Field, ...]
    outer: bool = False

    @property
    def schema(self) -> Schema:
        return Schema(self.input_schema.fields + self.result_fields)

    def params(self) -> dict[str, object]:
        return {
            "query": self.query.name,
            "store": self.query.store,
            "args": [a.to_cpl() for a in self.args],
            "columns": [f"{self.alias}.{f.name} {f.type}" for f in self.result_fields],
            "types": self.typed_by,
            "outer": self.outer,
        }

    @property
    def typed_by(self) -> str:
        """Where the result types come from (docs/language.md, "SQL queries")."""
        if self.query.returns is not None:
            return "RETURNS"
        if self.query.described is not None:
            return f"described by data store {self.query.store}"
        return "not described: read as varchar"


@dataclass(frozen=True, kw_only=True)
class UpdateSQL(Node):
    """Per event, in event order: bind `args` and execute the statement.

    The output is the input's fields, followed by the affected-row count when `count_field` is set.
    """

    input_schema: Schema
    query: SqlQuery
    alias: str
    args: tuple[Expr, ...]
    count_field: str | None = None

    @property
    def schema(self) -> Schema:
        extra = (Field(self.count_field, T_BIGINT, nullable=False),) if self.count_field else ()
        return Schema(self.input_schema.fields + extra)

    def params(self) -> dict[str, object]:
        p: dict[str, object] = {
            "query": self.query.name,
            "store": self.query.store,
            "args": [a.to_cpl() for a in self.args],
        }
        if self.count_field:
            p["count"] = f"{self.alias}.{self.count_field}"
        return p


@dataclass(frozen=True, kw_only=True)
class Materialize(Node):
    """Store each input tuple as a row of `table`: upsert by primary key, otherwise append."""

    input_schema: Schema
    table: Table

    @property
    def schema(self) -> Schema:
        return self.input_schema

    @property
    def outputs(self) -> int:
        return 0

    def params(self) -> dict[str, object]:
        return {
            "table": self.table.name,
            "store": self.table.store,
            "mode": "upsert" if self.table.primary_key else "append",
        }


@dataclass(frozen=True, kw_only=True)
class Sink(Node):
    """A named output stream that nothing else in the script consumes."""

    stream: str
    input_schema: Schema

    @property
    def schema(self) -> Schema:
        return self.input_schema

    @property
    def outputs(self) -> int:
        return 0

    def params(self) -> dict[str, object]:
        return {"stream": self.stream}


OPERATORS: tuple[type[Node], ...] = (
    Source,
    Map,
    Filter,
    MultiFilter,
    Union,
    Aggregate,
    Join,
    ReadSQL,
    UpdateSQL,
    Materialize,
    Pattern,
    OutputRate,
    Sink,
)


@dataclass(frozen=True)
class Graph:
    """A compiled script: nodes in topological order plus the declarations they refer to."""

    nodes: tuple[Node, ...]
    # Every named stream of the script (sources and statement outputs) and the port producing it.
    streams: dict[str, Port] = field(default_factory=dict)
    stores: dict[str, DataStore] = field(default_factory=dict)
    queries: dict[str, SqlQuery] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    # The script line of the statement (or declaration) that produces each named stream.
    stream_lines: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for n in self.nodes:
            if n.id in seen:
                raise ValueError(f"duplicate node id {n.id}")
            for p in n.inputs:
                if p.node not in seen:
                    raise ValueError(f"node {n.id} reads {p} before it is defined (not topological)")
            seen.add(n.id)

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def consumers(self, port: Port) -> list[Node]:
        return [n for n in self.nodes if port in n.inputs]

    def sources(self) -> list[Source]:
        return [n for n in self.nodes if isinstance(n, Source)]

    def stream_schema(self, stream: str) -> Schema:
        return self.node(self.streams[stream].node).schema

    def edges(self) -> list[tuple[Port, str]]:
        return [(p, n.id) for n in self.nodes for p in n.inputs]
