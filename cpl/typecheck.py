"""Name resolution and type checking: AST expressions → typed IR (`operators.expr`).

A `Scope` says which fields an expression can see; `Checker.check` resolves every name in it to a
positional `Col`, applies SQL's typing rules and returns the IR, or raises `TypeCheckError` with
the position of the offending sub-expression. `AggregateChecker` is the variant used in SELECT and
HAVING of a windowed statement: it collects aggregate calls and maps grouped expressions onto the
aggregated row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from cpl import ast
from operators import expr as ir
from operators.functions import FunctionTypeError, lookup
from operators.graph import WINDOW_END, WINDOW_START
from operators.types import (
    BIGINT,
    DECIMAL,
    DOUBLE,
    INTEGER,
    NUMERIC_KINDS,
    T_BIGINT,
    T_BOOLEAN,
    T_DOUBLE,
    T_INTEGER,
    T_NULL,
    T_STRING,
    T_TIMESTAMP,
    TIMESTAMP,
    TYPE_ALIASES,
    DataType,
    Schema,
    common_type,
    wider_numeric,
)


class TypeCheckError(Exception):
    def __init__(self, message: str, pos: ast.Pos):
        super().__init__(message)
        self.message = message
        self.pos = pos


def resolve_type(t: ast.TypeName) -> DataType:
    kind = TYPE_ALIASES.get(t.name)
    if kind is None:
        known = "boolean, integer, bigint, double, decimal(p, s), char(n), varchar(n), timestamp"
        raise TypeCheckError(f"unknown type '{t.name}'; the types are {known}", t.pos)
    if kind in ("char", "varchar"):
        if len(t.args) > 1:
            raise TypeCheckError(f"{kind} takes one length, as in {kind}(20)", t.pos)
        return DataType(kind, length=t.args[0] if t.args else None)
    if kind == DECIMAL:
        p = t.args[0] if t.args else 38
        s = t.args[1] if len(t.args) > 1 else 0
        if not 1 <= p <= 38 or s > p:
            raise TypeCheckError(
                f"decimal({p}, {s}) is out of range: precision 1..38, scale <= precision", t.pos
            )
        return DataType(DECIMAL, precision=p, scale=s)
    if t.args:
        raise TypeCheckError(f"type {kind} takes no length or precision", t.pos)
    return DataType(kind)


def parse_timestamp(text: str) -> datetime | None:
    """ISO 8601 text → an aware UTC datetime; a value without a zone is taken as UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass
class Input:
    """One input of a statement as seen by its expressions."""

    schema: Schema
    qualifiers: frozenset[str]  # lower-case stream names and aliases that may prefix its fields
    side: int = 0
    offset: int = 0  # where its fields start in the side's tuple (ON SQL result columns follow the event)


@dataclass
class Scope:
    inputs: list[Input] = field(default_factory=list)

    def resolve(self, name: ast.Name) -> ir.Col:
        parts = name.parts
        if len(parts) == 2:
            q, f = parts[0].lower(), parts[1]
            owners = [i for i in self.inputs if q in i.qualifiers]
            if not owners:
                known = sorted({q for i in self.inputs for q in i.qualifiers})
                raise TypeCheckError(
                    f"unknown stream or alias '{parts[0]}'; known here: {', '.join(known)}", name.pos
                )
            for inp in owners:
                fd = inp.schema.get(f)
                if fd is not None:
                    return self._col(inp, fd.name, parts[0])
            raise TypeCheckError(
                f"'{parts[0]}' has no field '{f}'; its fields: {_fields(owners[0].schema)}", name.pos
            )
        f = parts[0]
        hits = [(i, i.schema.get(f)) for i in self.inputs if i.schema.get(f) is not None]
        if not hits:
            fields = ", ".join(_fields(i.schema) for i in self.inputs) or "none"
            raise TypeCheckError(f"unknown field '{f}'; the fields here are: {fields}", name.pos)
        if len(hits) > 1:
            quals = [sorted(i.qualifiers)[0] for i, _ in hits]
            raise TypeCheckError(
                f"field '{f}' is ambiguous: it is in {' and '.join(quals)}; qualify it, e.g. {quals[0]}.{f}",
                name.pos,
            )
        inp, fd = hits[0]
        assert fd is not None
        return self._col(inp, fd.name, None)

    @staticmethod
    def _col(inp: Input, name: str, qualifier: str | None) -> ir.Col:
        fd = inp.schema.get(name)
        assert fd is not None
        return ir.Col(fd.type, inp.offset + inp.schema.position(name), fd.name, inp.side, qualifier)


def _fields(schema: Schema) -> str:
    return ", ".join(schema.names)


_ARITH = {"+", "-", "*", "/", "%"}
WINDOW_BOUNDS = {"window_start": WINDOW_START, "window_end": WINDOW_END}
_COMPARE = {"=", "<>", "<", "<=", ">", ">="}


class Checker:
    def __init__(self, scope: Scope):
        self.scope = scope

    # The entry point; subclasses intercept nodes before the generic rules apply.
    def check(self, e: ast.Expr) -> ir.Expr:
        return self._check(e)

    def check_bool(self, e: ast.Expr, what: str) -> ir.Expr:
        out = self.check(e)
        if out.type.kind not in ("boolean", "null"):
            raise TypeCheckError(f"{what} must be a boolean condition, not {out.type}", _pos(e))
        return out

    def _check(self, e: ast.Expr) -> ir.Expr:
        method = getattr(self, "_" + type(e).__name__.lower())
        result: ir.Expr = method(e)
        return result

    # leaves
    def _literal(self, e: ast.Literal) -> ir.Expr:
        if e.kind == "int":
            assert isinstance(e.value, int)
            if e.value < -(2**63) or e.value > 2**63 - 1:
                raise TypeCheckError("integer literal is out of range for bigint", e.pos)
            t = T_INTEGER if -(2**31) <= e.value < 2**31 else T_BIGINT
            return ir.Lit(t, e.value)
        if e.kind == "decimal":
            # A literal with a point is a double, as in Spark and most CEP engines; CAST(... AS
            # decimal(p, s)) gives exact decimals.
            return ir.Lit(T_DOUBLE, float(str(e.value)))
        if e.kind == "string":
            return ir.Lit(T_STRING, e.value)
        if e.kind == "bool":
            return ir.Lit(T_BOOLEAN, e.value)
        if e.kind == "timestamp":
            ts = parse_timestamp(str(e.value))
            if ts is None:
                raise TypeCheckError(
                    f"'{e.value}' is not a timestamp; write e.g. '2026-01-31 12:00:00'", e.pos
                )
            return ir.Lit(T_TIMESTAMP, ts)
        return ir.Lit(T_NULL, None)

    def _name(self, e: ast.Name) -> ir.Expr:
        return self.scope.resolve(e)

    # operators
    def _unaryop(self, e: ast.UnaryOp) -> ir.Expr:
        arg = self.check(e.arg)
        if e.op == "not":
            if arg.type.kind not in ("boolean", "null"):
                raise TypeCheckError(f"NOT needs a boolean operand, not {arg.type}", e.pos)
            return ir.Unary(T_BOOLEAN, "not", arg)
        if not (arg.type.is_numeric or arg.type.is_null):
            raise TypeCheckError(f"unary '{e.op}' needs a number, not {arg.type}", e.pos)
        return ir.Unary(arg.type, "neg", arg)

    def _binaryop(self, e: ast.BinaryOp) -> ir.Expr:
        left, right = self.check(e.left), self.check(e.right)
        op = e.op
        if op in ("and", "or"):
            for side in (left, right):
                if side.type.kind not in ("boolean", "null"):
                    raise TypeCheckError(f"{op.upper()} needs boolean operands, not {side.type}", e.pos)
            return ir.Binary(T_BOOLEAN, op, left, right)
        if op == "||":
            return ir.Binary(T_STRING, op, left, right)
        if op in _ARITH:
            for side in (left, right):
                if not (side.type.is_numeric or side.type.is_null):
                    raise TypeCheckError(
                        f"'{op}' needs numbers, not {left.type} {op} {right.type}"
                        + ("; use || to concatenate strings" if op == "+" and side.type.is_string else ""),
                        e.pos,
                    )
            t = wider_numeric(left.type, right.type)
            if op == "/" and t.kind in (INTEGER, BIGINT):
                t = T_DOUBLE  # division is exact-ish, as in Spark: 7 / 2 = 3.5
            elif t.kind == DECIMAL:
                t = _decimal_result(op, left.type, right.type, t)
            return ir.Binary(t, op, left, right)
        assert op in _COMPARE, op
        left, right = _coerce_timestamp_literals(left, right)
        if common_type(left.type, right.type) is None:
            raise TypeCheckError(f"cannot compare {left.type} with {right.type}", e.pos)
        return ir.Binary(T_BOOLEAN, op, left, right)

    def _isnull(self, e: ast.IsNull) -> ir.Expr:
        return ir.IsNull(T_BOOLEAN, self.check(e.arg), e.negated)

    def _between(self, e: ast.Between) -> ir.Expr:
        arg, low, high = self.check(e.arg), self.check(e.low), self.check(e.high)
        arg, low = _coerce_timestamp_literals(arg, low)
        arg, high = _coerce_timestamp_literals(arg, high)
        for b in (low, high):
            if common_type(arg.type, b.type) is None:
                raise TypeCheckError(
                    f"BETWEEN bounds must be comparable with {arg.type}, not {b.type}", e.pos
                )
        return ir.Between(T_BOOLEAN, arg, low, high, e.negated)

    def _inlist(self, e: ast.InList) -> ir.Expr:
        arg = self.check(e.arg)
        items = []
        for item in e.items:
            x = self.check(item)
            arg, x = _coerce_timestamp_literals(arg, x)
            if common_type(arg.type, x.type) is None:
                raise TypeCheckError(
                    f"IN list item of type {x.type} cannot be compared with {arg.type}", _pos(item)
                )
            items.append(x)
        return ir.InList(T_BOOLEAN, arg, tuple(items), e.negated)

    def _like(self, e: ast.Like) -> ir.Expr:
        arg, pattern = self.check(e.arg), self.check(e.pattern)
        for side in (arg, pattern):
            if not (side.type.is_string or side.type.is_null):
                raise TypeCheckError(f"LIKE compares strings, not {side.type}", e.pos)
        return ir.Like(T_BOOLEAN, arg, pattern, e.negated)

    def _case(self, e: ast.Case) -> ir.Expr:
        operand = self.check(e.operand) if e.operand is not None else None
        whens: list[tuple[ir.Expr, ir.Expr]] = []
        result_type: DataType = T_NULL
        for cond_ast, value_ast in e.whens:
            if operand is not None:
                value = self.check(cond_ast)
                if common_type(operand.type, value.type) is None:
                    raise TypeCheckError(f"CASE compares {operand.type} with {value.type}", _pos(cond_ast))
                cond: ir.Expr = ir.Binary(T_BOOLEAN, "=", operand, value)
            else:
                cond = self.check_bool(cond_ast, "a WHEN condition")
            then = self.check(value_ast)
            result_type = self._unify(result_type, then.type, value_ast)
            whens.append((cond, then))
        else_ = self.check(e.else_) if e.else_ is not None else None
        if else_ is not None and e.else_ is not None:
            result_type = self._unify(result_type, else_.type, e.else_)
        return ir.Case(result_type, tuple(whens), else_)

    @staticmethod
    def _unify(a: DataType, b: DataType, where: ast.Expr) -> DataType:
        c = common_type(a, b)
        if c is None:
            raise TypeCheckError(f"CASE branches have incompatible types {a} and {b}", _pos(where))
        return c

    def _cast(self, e: ast.Cast) -> ir.Expr:
        arg = self.check(e.arg)
        to = resolve_type(e.to)
        src = arg.type.kind
        if (src == TIMESTAMP and to.kind in (*NUMERIC_KINDS, "boolean")) or (
            to.kind == TIMESTAMP and (src in NUMERIC_KINDS or src == "boolean")
        ):
            raise TypeCheckError(
                f"cannot cast {arg.type} to {to}; use epoch_millis() / from_epoch_millis() for numbers", e.pos
            )
        if isinstance(arg, ir.Lit) and arg.value is not None:
            folded = _fold_cast(arg, to)
            if folded is not None:
                return folded
        return ir.Cast(to, arg)

    def _call(self, e: ast.Call) -> ir.Expr:
        if e.name in WINDOW_BOUNDS:
            raise TypeCheckError(
                f"{e.name}() is only allowed in SELECT or HAVING of a statement that reads a TIME window",
                e.pos,
            )
        if e.name in ir.AGGREGATE_FUNCTIONS:
            raise TypeCheckError(
                f"aggregate function {e.name}() is only allowed in SELECT or HAVING of a statement "
                "that reads a stream WINDOW",
                e.pos,
            )
        fn = lookup(e.name)
        if fn is None:
            raise TypeCheckError(f"unknown function '{e.name}'", e.pos)
        if e.star or e.distinct:
            raise TypeCheckError(f"{e.name}() does not take * or DISTINCT", e.pos)
        n = len(e.args)
        if n < fn.min_args or (fn.max_args is not None and n > fn.max_args):
            want = (
                str(fn.min_args)
                if fn.max_args == fn.min_args
                else f"{fn.min_args} or more"
                if fn.max_args is None
                else f"{fn.min_args} to {fn.max_args}"
            )
            raise TypeCheckError(
                f"{fn.name}() takes {want} argument{'s' if want != '1' else ''}, not {n}", e.pos
            )
        args = tuple(self.check(a) for a in e.args)
        try:
            t = fn.result([a.type for a in args])
        except FunctionTypeError as err:
            raise TypeCheckError(str(err), e.pos) from None
        if fn.name == "round" and t.kind == DECIMAL:
            # round(decimal(p, s), d) has d places (0 without d); d must be a constant to type it
            if len(args) > 1 and not (isinstance(args[1], ir.Lit) and isinstance(args[1].value, int)):
                raise TypeCheckError("round() of a decimal takes a constant number of digits", e.pos)
            d = args[1].value if len(args) > 1 else 0  # type: ignore[attr-defined]
            t = DataType(DECIMAL, precision=t.precision, scale=max(0, min(t.scale or 0, d)))
        return ir.Func(t, fn.name, args)


def _scale(t: DataType) -> int:
    return (t.scale or 0) if t.kind == DECIMAL else 0


def _decimal_result(op: str, a: DataType, b: DataType, wide: DataType) -> DataType:
    """Decimal result scales, as the evaluator computes them: a product keeps every digit
    (s1 + s2), a quotient is rounded to at least 6 places, + - % keep the wider scale."""
    if op == "*":
        return DataType(DECIMAL, precision=38, scale=min(38, _scale(a) + _scale(b)))
    if op == "/":
        return DataType(DECIMAL, precision=38, scale=max(wide.scale or 0, 6))
    return wide


def _pos(e: ast.Expr) -> ast.Pos:
    return getattr(e, "pos", ast.NOPOS)


def _coerce_timestamp_literals(a: ir.Expr, b: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
    """Let `ts > '2026-01-01'` compare a timestamp with a string literal, as SQL users expect."""

    def conv(lit: ir.Expr) -> ir.Expr:
        if isinstance(lit, ir.Lit) and lit.type.is_string and isinstance(lit.value, str):
            ts = parse_timestamp(lit.value)
            if ts is not None:
                return ir.Lit(T_TIMESTAMP, ts)
        return lit

    if a.type.kind == TIMESTAMP:
        b = conv(b)
    if b.type.kind == TIMESTAMP:
        a = conv(a)
    return a, b


def _fold_cast(lit: ir.Lit, to: DataType) -> ir.Expr | None:
    """Casts of literals are folded at compile time, so CAST('1.5' AS decimal(4,2)) is a constant."""
    v = lit.value
    try:
        if to.kind == DECIMAL and isinstance(v, str | int | float) and not isinstance(v, bool):
            d = Decimal(str(v)).quantize(Decimal(1).scaleb(-(to.scale or 0)))
            return ir.Lit(to, d)
        if to.kind == DOUBLE and isinstance(v, str | int | float) and not isinstance(v, bool):
            return ir.Lit(to, float(v))
        if to.kind == TIMESTAMP and isinstance(v, str):
            ts = parse_timestamp(v)
            return ir.Lit(to, ts) if ts is not None else None
    except (InvalidOperation, ValueError):
        return None
    return None


# ---- aggregates -------------------------------------------------------------------------------------


def aggregate_type(func: str, arg: DataType | None, pos: ast.Pos) -> DataType:
    if func == "count":
        return T_BIGINT
    assert arg is not None
    if func in ("min", "max"):
        return arg
    if not (arg.is_numeric or arg.is_null):
        raise TypeCheckError(f"{func}() needs a numeric argument, not {arg}", pos)
    if func == "avg":
        return (
            DataType(DECIMAL, precision=38, scale=max(arg.scale or 0, 6)) if arg.kind == DECIMAL else T_DOUBLE
        )
    # sum widens integers so that totals do not overflow, as SQL engines do
    if arg.kind in (INTEGER, BIGINT):
        return T_BIGINT
    return wider_numeric(arg, arg)


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
        if not _has_aggregate(e):
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
            if _has_aggregate(e.args[0]):
                raise TypeCheckError("aggregate functions cannot be nested", e.pos)
            arg = self.plain.check(e.args[0])
            agg = ir.Agg(aggregate_type(e.name, arg.type, e.pos), e.name, arg)
        i = self.agg_index(agg)
        return ir.Col(agg.type, i, agg_name(i - len(self.keys)))


def place_window_bounds(e: ir.Expr, row_width: int) -> ir.Expr:
    """Point window_start()/window_end() at their place in the aggregated row, after the aggregates."""
    if isinstance(e, ir.Col) and e.index == -1:
        return replace(e, index=row_width + (0 if e.name == WINDOW_START else 1))
    changes: dict[str, Any] = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, ir.Expr):
            changes[f.name] = place_window_bounds(v, row_width)
        elif isinstance(v, tuple) and v and all(isinstance(x, ir.Expr | tuple) for x in v):
            changes[f.name] = tuple(
                place_window_bounds(x, row_width)
                if isinstance(x, ir.Expr)
                else tuple(place_window_bounds(y, row_width) for y in x)
                for x in v
            )
    return replace(e, **changes) if changes else e


def agg_name(i: int) -> str:
    """The name of the i-th aggregate in the aggregated row; not a valid CPL name, so no clash."""
    return f"$agg{i}"


def _has_aggregate(e: ast.Expr) -> bool:
    stack: list[ast.Expr] = [e]
    while stack:
        node = stack.pop()
        # window_start()/window_end() read the aggregated row, as aggregate calls do
        if isinstance(node, ast.Call) and (node.name in ir.AGGREGATE_FUNCTIONS or node.name in WINDOW_BOUNDS):
            return True
        stack.extend(ast.expr_children(node))
    return False


def contains_aggregate(e: ast.Expr) -> bool:
    return _has_aggregate(e)
