"""The expression IR shared by every operator and both executors.

Expressions are immutable trees whose leaves reference input fields by *position* (and, in a Join,
by side), never by text. The compiler resolves names and types once; executors then compile the
tree into a Python closure (reference executor) or a PySpark Column (Spark deployer). Nothing here
is ever turned back into text for an engine to parse: `to_cpl` exists for people (explain, errors).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from operators.datatypes import T_BOOLEAN, DataType
from operators.values import sql_quoted


@dataclass(frozen=True)
class Expr:
    type: DataType

    def children(self) -> tuple[Expr, ...]:
        return ()

    def to_cpl(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass(frozen=True)
class Lit(Expr):
    value: Any

    def to_cpl(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, datetime):
            return "TIMESTAMP '" + v.strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".") + "'"
        if isinstance(v, str):
            return sql_quoted(v)
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, Decimal):
            return f"CAST('{v}' AS {self.type})"
        return str(v)


@dataclass(frozen=True)
class Col(Expr):
    """A reference to field `index` of the input (of input `side` in a Join)."""

    index: int
    name: str
    side: int = 0
    qualifier: str | None = field(default=None, compare=False)  # for display only

    def to_cpl(self) -> str:
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "not" | "neg"
    arg: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def to_cpl(self) -> str:
        return f"(NOT {self.arg.to_cpl()})" if self.op == "not" else f"(-{self.arg.to_cpl()})"


ARITHMETIC_OPS = ("+", "-", "*", "/", "%")
COMPARISON_OPS = ("=", "<>", "<", "<=", ">", ">=")
LOGICAL_OPS = ("and", "or")
CONCAT_OP = "||"


@dataclass(frozen=True)
class Binary(Expr):
    op: str  # one of ARITHMETIC_OPS, COMPARISON_OPS, LOGICAL_OPS or CONCAT_OP
    left: Expr
    right: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def to_cpl(self) -> str:
        op = self.op.upper() if self.op in LOGICAL_OPS else self.op
        return f"({self.left.to_cpl()} {op} {self.right.to_cpl()})"


@dataclass(frozen=True)
class IsNull(Expr):
    arg: Expr
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def to_cpl(self) -> str:
        return f"({self.arg.to_cpl()} IS {'NOT ' if self.negated else ''}NULL)"


@dataclass(frozen=True)
class InList(Expr):
    arg: Expr
    items: tuple[Expr, ...]
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.arg, *self.items)

    def to_cpl(self) -> str:
        items = ", ".join(i.to_cpl() for i in self.items)
        return f"({self.arg.to_cpl()} {'NOT ' if self.negated else ''}IN ({items}))"


@dataclass(frozen=True)
class Between(Expr):
    arg: Expr
    low: Expr
    high: Expr
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.arg, self.low, self.high)

    def to_cpl(self) -> str:
        neg = "NOT " if self.negated else ""
        return f"({self.arg.to_cpl()} {neg}BETWEEN {self.low.to_cpl()} AND {self.high.to_cpl()})"


@dataclass(frozen=True)
class Like(Expr):
    arg: Expr
    pattern: Expr
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.arg, self.pattern)

    def to_cpl(self) -> str:
        return f"({self.arg.to_cpl()} {'NOT ' if self.negated else ''}LIKE {self.pattern.to_cpl()})"


@dataclass(frozen=True)
class Case(Expr):
    whens: tuple[tuple[Expr, Expr], ...]
    else_: Expr | None = None

    def children(self) -> tuple[Expr, ...]:
        out: list[Expr] = []
        for c, v in self.whens:
            out += [c, v]
        if self.else_ is not None:
            out.append(self.else_)
        return tuple(out)

    def to_cpl(self) -> str:
        parts = ["CASE"]
        for c, v in self.whens:
            parts.append(f"WHEN {c.to_cpl()} THEN {v.to_cpl()}")
        if self.else_ is not None:
            parts.append(f"ELSE {self.else_.to_cpl()}")
        parts.append("END")
        return " ".join(parts)


@dataclass(frozen=True)
class Cast(Expr):
    arg: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,)

    def to_cpl(self) -> str:
        return f"CAST({self.arg.to_cpl()} AS {self.type})"


@dataclass(frozen=True)
class Func(Expr):
    """A call of a scalar function from the fixed catalogue in `operators.functions`."""

    name: str
    args: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def to_cpl(self) -> str:
        return f"{self.name}({', '.join(a.to_cpl() for a in self.args)})"


AGGREGATE_FUNCTIONS = ("count", "sum", "avg", "min", "max")


@dataclass(frozen=True)
class Agg(Expr):
    """An aggregate call; `arg` None means count(*). Only appears in `Aggregate.aggs`."""

    func: str
    arg: Expr | None

    def children(self) -> tuple[Expr, ...]:
        return () if self.arg is None else (self.arg,)

    def to_cpl(self) -> str:
        return f"{self.func}({'*' if self.arg is None else self.arg.to_cpl()})"


def walk(e: Expr) -> list[Expr]:
    """Every node of the tree, parents before children."""
    out = [e]
    for c in e.children():
        out.extend(walk(c))
    return out


def depth(e: Expr) -> int:
    kids = e.children()
    return 1 + (max(depth(c) for c in kids) if kids else 0)


def replace_cols(e: Expr, fn: Callable[[Col], Col | None]) -> Expr:
    """`e` with each Col that `fn` gives a replacement for replaced (None: kept), and the rest of
    the tree as it is (nodes without a change are the same objects)."""
    if isinstance(e, Col):
        return fn(e) or e
    changes: dict[str, Any] = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            changes[f.name] = replace_cols(v, fn)
        elif isinstance(v, tuple) and v and all(isinstance(x, Expr | tuple) for x in v):
            changes[f.name] = tuple(
                replace_cols(x, fn) if isinstance(x, Expr) else tuple(replace_cols(y, fn) for y in x)
                for x in v
            )
    return replace(e, **changes) if changes else e


def columns(e: Expr) -> list[Col]:
    return [n for n in walk(e) if isinstance(n, Col)]


def conjuncts(e: Expr) -> list[Expr]:
    """Split a predicate at its top-level ANDs."""
    if isinstance(e, Binary) and e.op == "and":
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def conjoin(parts: list[Expr]) -> Expr | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = Binary(T_BOOLEAN, "and", out, p)
    return out
