"""What planning has built and declared so far (`PlanState`), shared by every planning step, and the
small records those steps pass along: a planned `Stream` and the `Planned` tip of a statement."""

from __future__ import annotations

from dataclasses import dataclass, field

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from operators import graph as g
from operators.datatypes import Schema
from operators.declarations import DescribeQuery


@dataclass
class Stream:
    name: str
    port: g.Port
    schema: Schema
    event_time: str | None
    line: int
    is_source: bool


@dataclass
class Planned:
    """What a statement has produced so far: the tip of its chain of nodes."""

    port: g.Port
    schema: Schema
    event_time: str | None


class SkipStatement(Exception):
    """A statement reads a stream whose own statement failed: its error was reported already."""


@dataclass
class PlanState:
    """The nodes planned so far, in script order, and the catalog of what the script declared."""

    nodes: list[g.Node] = field(default_factory=list)
    streams: dict[str, Stream] = field(default_factory=dict)  # by lower-case name
    failed: set[str] = field(default_factory=set)  # streams whose statement had errors
    windows: dict[str, tuple[ast.WindowSpec, int]] = field(default_factory=dict)
    stores: dict[str, g.DataStore] = field(default_factory=dict)
    queries: dict[str, g.SqlQuery] = field(default_factory=dict)
    tables: dict[str, g.Table] = field(default_factory=dict)
    declared_lines: dict[str, int] = field(default_factory=dict)  # "kind:name" → its line
    # The bound data stores, asked for the result columns of each SELECT (cpl.describe); None: the
    # stores are not bound, and a SELECT without RETURNS has varchar results.
    describe: DescribeQuery | None = None
    warnings: list[tuple[str, ast.Pos]] = field(default_factory=list)
    # A stream read in time order (cpl.plan_order), by the stream's lower-case name
    reordered: dict[str, Stream] = field(default_factory=dict)
    # Per node id, in plan order, where its rows come out of time order from (cpl.plan_order.unordered)
    unordered: dict[str, g.Pattern | g.Join | None] = field(default_factory=dict)

    def add(self, node: g.Node) -> g.Port:
        self.nodes.append(node)
        return g.Port(node.id)

    def next_id(self) -> str:
        return f"n{len(self.nodes) + 1}"

    def declare(self, kind: str, name: str, pos: ast.Pos) -> None:
        """Record a window, data store, SQL query or table, refusing a second one of the same name."""
        key = f"{kind}:{name.lower()}"
        if key in self.declared_lines:
            raise PlanError(f"{kind} '{name}' is already declared at line {self.declared_lines[key]}", pos)
        self.declared_lines[key] = pos.line

    def check_new_stream(self, name: str, pos: ast.Pos) -> None:
        old = self.streams.get(name.lower())
        if old is not None:
            how = "declared" if old.is_source else "produced by the statement"
            raise PlanError(
                f"stream '{name}' is already {how} at line {old.line}; a stream has one producer "
                "(merge several with FROM a, b)",
                pos,
            )


def qualifiers(item: ast.FromItem) -> frozenset[str]:
    """The lower-case names that may prefix the fields of an input: its stream's and its alias."""
    names = {item.stream.lower()}
    if item.alias:
        names.add(item.alias.lower())
    return frozenset(names)
