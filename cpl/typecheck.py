"""Type checking: AST expressions → typed IR (`operators.expr`).

`Checker.check` resolves every name of an expression through its `Scope` to a positional `Col`,
applies SQL's typing rules and returns the IR, or raises `TypeCheckError` with the position of the
offending sub-expression. `cpl.aggregate_check.AggregateChecker` is the variant used in SELECT and
HAVING of a windowed statement.
"""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import TypeCheckError
from cpl.scope import Scope
from cpl.type_rules import (
    arithmetic_result,
    coerce_timestamp_literals,
    fold_cast,
    numeric_view,
    parse_timestamp,
    resolve_type,
)
from operators import expr as ir
from operators.datatypes import (
    DECIMAL,
    NUMERIC_KINDS,
    T_BIGINT,
    T_BOOLEAN,
    T_DOUBLE,
    T_INTEGER,
    T_NULL,
    T_STRING,
    T_TIMESTAMP,
    TIMESTAMP,
    DataType,
    common_type,
)
from operators.decimals import integral_type, round_type
from operators.functions import FunctionTypeError, lookup
from operators.graph import WINDOW_END, WINDOW_START

_ARITH = {"+", "-", "*", "/", "%"}
WINDOW_BOUNDS = {"window_start": WINDOW_START, "window_end": WINDOW_END}
_COMPARE = {"=", "<>", "<", "<=", ">", ">="}


class Checker:
    """Types the expressions of one scope; `check` is the entry point for any expression."""

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
            return ir.Binary(arithmetic_result(op, left, right, e.pos), op, left, right)
        assert op in _COMPARE, op
        left, right = coerce_timestamp_literals(left, right)
        if common_type(left.type, right.type) is None:
            raise TypeCheckError(f"cannot compare {left.type} with {right.type}", e.pos)
        return ir.Binary(T_BOOLEAN, op, left, right)

    def _isnull(self, e: ast.IsNull) -> ir.Expr:
        return ir.IsNull(T_BOOLEAN, self.check(e.arg), e.negated)

    def _between(self, e: ast.Between) -> ir.Expr:
        arg, low, high = self.check(e.arg), self.check(e.low), self.check(e.high)
        arg, low = coerce_timestamp_literals(arg, low)
        arg, high = coerce_timestamp_literals(arg, high)
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
            arg, x = coerce_timestamp_literals(arg, x)
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
        for cond_ast, value_ast in e.whens:
            if operand is not None:
                value = self.check(cond_ast)
                if common_type(operand.type, value.type) is None:
                    raise TypeCheckError(f"CASE compares {operand.type} with {value.type}", _pos(cond_ast))
                cond: ir.Expr = ir.Binary(T_BOOLEAN, "=", operand, value)
            else:
                cond = self.check_bool(cond_ast, "a WHEN condition")
            whens.append((cond, self.check(value_ast)))
        else_ = self.check(e.else_) if e.else_ is not None else None
        results = [then for _, then in whens] + ([else_] if else_ is not None else [])
        where = [value for _, value in e.whens] + ([e.else_] if e.else_ is not None else [])
        result_type: DataType = T_NULL
        for t, at in zip(numeric_view(results), where, strict=True):
            c = common_type(result_type, t)
            if c is None:
                raise TypeCheckError(f"CASE branches have incompatible types {result_type} and {t}", _pos(at))
            result_type = c
        return ir.Case(result_type, tuple(whens), else_)

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
            folded = fold_cast(arg, to)
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
            t = fn.result(numeric_view(list(args)))
        except FunctionTypeError as err:
            raise TypeCheckError(str(err), e.pos) from None
        if fn.name == "mod":  # the type of %, decimals included
            t = arithmetic_result("%", args[0], args[1], e.pos)
        elif fn.name == "round" and t.kind == DECIMAL:
            # round(decimal(p, s), d) has d places (0 without d); d must be a constant to type it
            if len(args) > 1 and not (isinstance(args[1], ir.Lit) and isinstance(args[1].value, int)):
                raise TypeCheckError("round() of a decimal takes a constant number of digits", e.pos)
            t = round_type(t, args[1].value if len(args) > 1 else 0)  # type: ignore[attr-defined]
        elif fn.name in ("floor", "ceil") and args[0].type.kind == DECIMAL:
            t = integral_type(args[0].type)
        return ir.Func(t, fn.name, args)


def _pos(e: ast.Expr) -> ast.Pos:
    return getattr(e, "pos", ast.NOPOS)
