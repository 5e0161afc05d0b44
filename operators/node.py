"""The pieces every node of the operator graph is made of (operators.graph): ports, named
expressions, the base node, and how a node shows its projections and derives its schema."""

from __future__ import annotations

from dataclasses import dataclass

from operators.datatypes import Field, Schema
from operators.expr import Expr


@dataclass(frozen=True)
class Port:
    node: str
    index: int = 0

    def __str__(self) -> str:
        return self.node if self.index == 0 else f"{self.node}.{self.index}"


@dataclass(frozen=True)
class NamedExpr:
    name: str
    expr: Expr


@dataclass(frozen=True, kw_only=True)
class Node:
    id: str
    inputs: tuple[Port, ...] = ()
    line: int = 0  # origin line of the statement or declaration in the script
    # Name of the field carrying event time in this node's output, when it has one.
    event_time: str | None = None

    @property
    def op(self) -> str:
        return type(self).__name__

    @property
    def schema(self) -> Schema:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    @property
    def outputs(self) -> int:
        return 1

    def params(self) -> dict[str, object]:
        """The operator's parameters, for explain; plain data only."""
        return {}


def _show(items: tuple[NamedExpr, ...]) -> list[str]:
    """`expr AS name`, or just `name` when the item passes a field through unchanged."""
    out = []
    for i in items:
        text = i.expr.to_cpl()
        out.append(text if text == i.name else f"{text} AS {i.name}")
    return out


def _schema_of(items: tuple[NamedExpr, ...]) -> Schema:
    return Schema(tuple(Field(i.name, i.expr.type) for i in items))
