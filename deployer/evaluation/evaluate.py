"""Compile expression IR into Python closures with SQL semantics (the reference executor's evaluator).

A tree is compiled once per node into nested closures; evaluating an event is then a few function
calls, with no per-event dispatch on node types. Semantics:

- NULL is None. AND/OR/NOT use three-valued logic (None is "unknown"); comparisons, arithmetic,
  `||`, LIKE and most functions give NULL when an operand is NULL. A predicate *holds* only when it
  evaluates to True (`holds`): NULL drops the event just like False.
- `/` on integers gives a double (7 / 2 = 3.5); decimals compute as operators.decimals says, exactly
  and rounded half up to their result type; `%` takes the sign of the dividend. Division or modulo
  by zero, an integer or decimal result outside its type's range, and a CAST of a value that does
  not convert raise `EvalError`: the event goes to the dead-letter sink instead of silently
  becoming NULL.
- LIKE: `%` any run, `_` one character, backslash escapes the next character; everything else,
  regex specials included, matches itself. The whole string must match.
- IN: True if some item equals the value; otherwise NULL if the value or some item is NULL;
  otherwise False. BETWEEN: low <= x AND x <= high, under three-valued logic.

For a Join, expressions read a pair: compile with `paired=True` and call with `(left, right)`;
`Col.side` selects the tuple.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from deployer.evaluation.functions import compile_function, sql_mod
from operators import decimals
from operators import expr as ir
from operators.datatypes import BIGINT, DECIMAL, DOUBLE, INTEGER, DataType, common_type
from operators.values import EvalError, caster, check_int, to_text, widener

Fn = Callable[[Any], Any]

# What evaluating an expression may raise for one event's values: that event is dead-lettered.
EVAL_ERRORS: tuple[type[BaseException], ...] = (EvalError, ArithmeticError)

__all__ = ["EVAL_ERRORS", "EvalError", "Fn", "compile_expr", "compile_predicate", "holds", "like_regex"]


def compile_expr(e: ir.Expr, *, paired: bool = False) -> Fn:
    """A closure computing `e` over an input tuple (or a (left, right) pair when `paired`)."""
    return _Compiler(paired).compile(e)


def compile_predicate(e: ir.Expr, *, paired: bool = False) -> Callable[[Any], bool]:
    """A closure that is True exactly when `e` evaluates to True (not False, not NULL)."""
    f = compile_expr(e, paired=paired)
    return lambda r: f(r) is True


def holds(v: Any) -> bool:
    return v is True


# ---- three-valued logic --------------------------------------------------------------------------


def _not3(v: Any) -> Any:
    return None if v is None else not v


def _and(a: Fn, b: Fn) -> Fn:
    def fn(r: Any) -> Any:
        x = a(r)
        if x is False:
            return False
        y = b(r)
        if y is False:
            return False
        return None if x is None or y is None else True

    return fn


def _or(a: Fn, b: Fn) -> Fn:
    def fn(r: Any) -> Any:
        x = a(r)
        if x is True:
            return True
        y = b(r)
        if y is True:
            return True
        return None if x is None or y is None else False

    return fn


# ---- arithmetic ------------------------------------------------------------------------------------


def _divide(a: Any, b: Any) -> Any:
    if b == 0:
        raise EvalError("division by zero")
    return float(a) / float(b)


def _negate(v: Any, kind: str) -> Any:
    if kind in (INTEGER, BIGINT):
        return check_int(-v, kind)
    if isinstance(v, Decimal):  # exact (unary minus would round to the context's 28 digits), no -0
        return v if v.is_zero() else v.copy_negate()
    return -v


_PLAIN_OPS: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _arith_op(op: str, t: DataType) -> Callable[[Any, Any], Any]:
    if t.kind == DECIMAL:
        return decimals.arithmetic(op, t)
    if op == "/":
        return _divide
    if op == "%":
        return sql_mod
    base = _PLAIN_OPS[op]
    if t.kind in (INTEGER, BIGINT):
        kind = t.kind
        return lambda a, b: check_int(base(a, b), kind)
    if t.kind == DOUBLE:

        def checked(a: Any, b: Any) -> Any:
            try:
                return base(a, b)
            except OverflowError:
                raise EvalError("numeric overflow") from None

        return checked
    return base


def _comparison_type(exprs: list[ir.Expr]) -> DataType | None:
    """The type values are compared as: their common type; None for decimals and integers, which
    are compared exactly, as they are (a common type of more than 38 digits would round them)."""
    t = exprs[0].type
    for x in exprs[1:]:
        t = common_type(t, x.type) or t
    return None if t.kind == DECIMAL else t


def _strict2(op: Callable[[Any, Any], Any], a: Fn, b: Fn) -> Fn:
    def fn(r: Any) -> Any:
        x = a(r)
        if x is None:
            return None
        y = b(r)
        if y is None:
            return None
        return op(x, y)

    return fn


# ---- LIKE ----------------------------------------------------------------------------------------------


def like_regex(pattern: str) -> re.Pattern[str]:
    """The regex equivalent of a SQL LIKE pattern (`%`, `_`, backslash escapes)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


_cached_like = lru_cache(maxsize=1024)(like_regex)


# ---- the compiler ---------------------------------------------------------------------------------------


class _Compiler:
    def __init__(self, paired: bool):
        self.paired = paired

    def compile(self, e: ir.Expr) -> Fn:
        handler = getattr(self, "_" + type(e).__name__.lower(), None)
        if handler is None:
            raise TypeError(f"cannot evaluate {type(e).__name__} here")
        fn: Fn = handler(e)
        return fn

    def as_type(self, e: ir.Expr, t: DataType | None) -> Fn:
        """`e` compiled and widened to the numeric type `t` when it is narrower (None: as it is)."""
        f = self.compile(e)
        if t is None:
            return f
        w = widener(e.type, t)
        if w is None:
            return f
        return lambda r: None if (v := f(r)) is None else w(v)

    def _lit(self, e: ir.Lit) -> Fn:
        v = e.value
        return lambda r: v

    def _col(self, e: ir.Col) -> Fn:
        i = e.index
        if self.paired:
            side = e.side
            return lambda r: r[side][i]
        return operator.itemgetter(i)

    def _unary(self, e: ir.Unary) -> Fn:
        f = self.compile(e.arg)
        if e.op == "not":
            return lambda r: _not3(f(r))
        kind = e.type.kind
        return lambda r: None if (v := f(r)) is None else _negate(v, kind)

    def _binary(self, e: ir.Binary) -> Fn:
        if e.op == "and":
            return _and(self.compile(e.left), self.compile(e.right))
        if e.op == "or":
            return _or(self.compile(e.left), self.compile(e.right))
        if e.op == "||":
            return _strict2(lambda a, b: to_text(a) + to_text(b), self.compile(e.left), self.compile(e.right))
        if e.op in _COMPARE:
            t = _comparison_type([e.left, e.right])
            # Compare decimals with doubles as doubles, as SQL does (Python compares them exactly).
            return _strict2(_COMPARE[e.op], self.as_type(e.left, t), self.as_type(e.right, t))
        t = e.type
        if t.kind == DECIMAL:  # the operands as they are: decimals.arithmetic computes exactly
            return _strict2(_arith_op(e.op, t), self.compile(e.left), self.compile(e.right))
        return _strict2(_arith_op(e.op, t), self.as_type(e.left, t), self.as_type(e.right, t))

    def _isnull(self, e: ir.IsNull) -> Fn:
        f = self.compile(e.arg)
        if e.negated:
            return lambda r: f(r) is not None
        return lambda r: f(r) is None

    def _inlist(self, e: ir.InList) -> Fn:
        t = _comparison_type([e.arg, *e.items])
        arg = self.as_type(e.arg, t)
        items = [self.as_type(x, t) for x in e.items]
        negated = e.negated

        def fn(r: Any) -> Any:
            v = arg(r)
            if v is None:
                return None
            unknown = False
            for item in items:
                x = item(r)
                if x is None:
                    unknown = True
                elif x == v:
                    return not negated
            return None if unknown else negated

        return fn

    def _between(self, e: ir.Between) -> Fn:
        t = _comparison_type([e.arg, e.low, e.high])
        ge = _strict2(operator.ge, self.as_type(e.arg, t), self.as_type(e.low, t))
        le = _strict2(operator.le, self.as_type(e.arg, t), self.as_type(e.high, t))
        both = _and(ge, le)
        if e.negated:
            return lambda r: _not3(both(r))
        return both

    def _like(self, e: ir.Like) -> Fn:
        arg = self.compile(e.arg)
        negated = e.negated
        if isinstance(e.pattern, ir.Lit):
            if e.pattern.value is None:
                return lambda r: None
            rx = like_regex(e.pattern.value)
            return lambda r: None if (v := arg(r)) is None else (rx.fullmatch(v) is not None) != negated
        pattern = self.compile(e.pattern)

        def fn(r: Any) -> Any:
            v, p = arg(r), pattern(r)
            if v is None or p is None:
                return None
            return (_cached_like(p).fullmatch(v) is not None) != negated

        return fn

    def _case(self, e: ir.Case) -> Fn:
        whens = [(self.compile(c), self.as_type(v, e.type)) for c, v in e.whens]
        default = self.as_type(e.else_, e.type) if e.else_ is not None else (lambda r: None)

        def fn(r: Any) -> Any:
            for cond, value in whens:
                if cond(r) is True:
                    return value(r)
            return default(r)

        return fn

    def _cast(self, e: ir.Cast) -> Fn:
        f = self.compile(e.arg)
        conv = caster(e.arg.type, e.type)
        if conv is None:
            return f
        return lambda r: conv(f(r))

    def _func(self, e: ir.Func) -> Fn:
        args = [self.compile(a) for a in e.args]
        return compile_function(e.name, args, [a.type for a in e.args], e.type)

    def _agg(self, e: ir.Agg) -> Fn:
        raise TypeError("aggregate calls are evaluated by the Aggregate operator, not as expressions")
