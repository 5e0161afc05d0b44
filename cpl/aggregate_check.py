"""Type checking of a windowed statement's SELECT and HAVING over its aggregated row: the group
keys, then one column per distinct aggregate call, then window_start()/window_end() of a TIME
window. `AggregateChecker` collects the aggregate calls as it checks."""

from __future__ import annotations

from dataclasses import replace

from cpl import syntax_tree as ast
from cpl.errors import TypeCheckError
from cpl.scope import Scope
from cpl.typecheck import WINDOW_BOUNDS, Checker
from operators import expr as ir
from operators.datatypes import (
    BIGINT,
    DECIMAL,
    INTEGER,
    T_BIGINT,
    T_DOUBLE,
    T_TIMESTAMP,
    DataType,
)
from operators.decimals import avg_type, sum_type
from operators.graph import WINDOW_START


def aggregate_type(func: str, arg: DataType | None, pos: ast.Pos) -> DataType:
    if func == "count":
        return T_BIGINT
    assert arg is not None
    if func in ("min", "max"):
        return arg
    if not (arg.is_numeric or arg.is_null):
        raise TypeCheckError(f"{func}() needs a numeric argument, not {arg}", pos)
    if func == "avg":
        return avg_type(arg) if arg.kind == DECIMAL else T_DOUBLE
    # sum widens integers so that totals do not overflow, as SQL engines do; a decimal's sum gets
    # ten more integer digits (operators.decimals)
    if arg.kind in (INTEGER, BIGINT):
        return T_BIGINT
    if arg.kind == DECIMAL:
        return sum_type(arg)
    return T_DOUBLE if arg.kind == "double" else arg


class AggregateChecker(Checker):
    """Checks SELECT/HAVING of an aggregate statement over the row (group keys ++ aggregates)."""

    def __init__(self, scope: Scope, keys: list[ir.Expr], key_names: list[str], window_kind: str = "time"):
        super().__init__(scope)
        self.window_kind = window_kind
        self.keys = keys
        self.key_names = key_names
        self.aggs: list[ir.Agg] = []
        self.plain = Checker(scope)

    def agg_index(self, agg: ir.Agg) -> int:
        if agg not in self.aggs:
            self.aggs.append(agg)
        return len(self.keys) + self.aggs.index(agg)

    def check(self, e: ast.Expr) -> ir.Expr:
        if isinstance(e, ast.Call) and e.name in ir.AGGREGATE_FUNCTIONS:
            return self._aggregate(e)
        if isinstance(e, ast.Call) and e.name in WINDOW_BOUNDS:
            if self.window_kind != "time":
                raise TypeCheckError(f"{e.name}() is only defined for TIME windows", e.pos)
            if e.args or e.star:
                raise TypeCheckError(f"{e.name}() takes no arguments", e.pos)
            # The index is fixed once all aggregates are known: see `place_window_bounds`.
            return ir.Col(T_TIMESTAMP, -1, WINDOW_BOUNDS[e.name])
        if not contains_aggregate(e):
            value = self.plain.check(e)
            if value in self.keys:
                i = self.keys.index(value)
                return ir.Col(value.type, i, self.key_names[i])
            if isinstance(value, ir.Lit):
                return value
            if isinstance(e, ast.Name):
                raise TypeCheckError(
                    f"field '{'.'.join(e.parts)}' must appear in GROUP BY or inside an aggregate function",
                    e.pos,
                )
        return self._check(e)

    def _aggregate(self, e: ast.Call) -> ir.Expr:
        if e.distinct:
            raise TypeCheckError(f"{e.name}(DISTINCT ...) is not supported", e.pos)
        if e.star:
            if e.name != "count":
                raise TypeCheckError(f"{e.name}(*) is not allowed; only count(*)", e.pos)
            agg = ir.Agg(T_BIGINT, "count", None)
        else:
            if len(e.args) != 1:
                raise TypeCheckError(f"{e.name}() takes one argument", e.pos)
            if contains_aggregate(e.args[0]):
                raise TypeCheckError("aggregate functions cannot be nested", e.pos)
            arg = self.plain.check(e.args[0])
            agg = ir.Agg(aggregate_type(e.name, arg.type, e.pos), e.name, arg)
        i = self.agg_index(agg)
        return ir.Col(agg.type, i, agg_name(i - len(self.keys)))


def place_window_bounds(e: ir.Expr, row_width: int) -> ir.Expr:
    """Point window_start()/window_end() at their place in the aggregated row, after the aggregates."""

    def bound(c: ir.Col) -> ir.Col | None:
        if c.index != -1:
            return None
        return replace(c, index=row_width + (0 if c.name == WINDOW_START else 1))

    return ir.replace_cols(e, bound)


def agg_name(i: int) -> str:
    """The name of the i-th aggregate in the aggregated row; not a valid CPL name, so no clash."""
    return f"$agg{i}"


def contains_aggregate(e: ast.Expr) -> bool:
    """Whether an expression calls an aggregate function, or window_start()/window_end()."""
    stack: list[ast.Expr] = [e]
    while stack:
        node = stack.pop()
        # window_start()/window_end() read the aggregated row, as aggregate calls do
        if isinstance(node, ast.Call) and (node.name in ir.AGGREGATE_FUNCTIONS or node.name in WINDOW_BOUNDS):
            return True
        stack.extend(ast.expr_children(node))
    return False
