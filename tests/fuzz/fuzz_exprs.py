"""Typed CPL expressions for the differential fuzzer: every expression it draws type-checks, by
construction, in the scope it is drawn for.

An expression is drawn for a *category* (INT, DBL, DEC, STR, BOOL, TS) from the fields in scope and
literals chosen to reach the corners where engines disagree: integer bounds (overflow), zero
divisors, NULLs, empty and non-ASCII strings, LIKE metacharacters, failing CASTs, timestamps on
window boundaries. Hypothesis draws every choice, so it can shrink an expression to a field or a
literal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

Draw = Callable[[st.SearchStrategy[Any]], Any]

INT, DBL, DEC, STR, BOOL, TS = "int", "double", "decimal", "string", "bool", "timestamp"
NUMERIC = (INT, DBL, DEC)
CATEGORIES = (INT, DBL, DEC, STR, BOOL, TS)
ORDERED = (INT, DBL, DEC, STR, TS)  # what min/max/comparisons accept

_KIND_TO_CATEGORY = {
    "integer": INT,
    "bigint": INT,
    "double": DBL,
    "decimal": DEC,
    "varchar": STR,
    "char": STR,
    "boolean": BOOL,
    "timestamp": TS,
}


def category(kind: str) -> str | None:
    """The category of a compiled field's type kind (operators.datatypes), None for NULL-typed."""
    return _KIND_TO_CATEGORY.get(kind)


@dataclass(frozen=True)
class Field:
    ref: str  # how an expression names it: `v`, or `a.v` in a join
    cat: str


INT_LITERALS = [
    "0",
    "1",
    "2",
    "3",
    "-1",
    "7",
    "10",
    "100",
    "2147483647",
    "-2147483648",
    "9223372036854775807",
]
DBL_LITERALS = ["0.5", "1.5", "-2.25", "0.1", "3.0", "1e3", "0.0"]
DEC_LITERALS = [
    "CAST('1.25' AS decimal(6, 2))",
    "CAST('-0.5' AS decimal(4, 1))",
    "CAST('100' AS decimal(5, 0))",
    "CAST('0.001' AS decimal(6, 3))",
]
STR_LITERALS = [
    "''",
    "'a'",
    "'b'",
    "'ab'",
    "'A'",
    "'é'",
    "'%'",
    "'_'",
    "' a '",
    "'10'",
    "'x''y'",
    "'a\\b'",
    "'x\ny'",
]
LIKE_PATTERNS = ["'a%'", "'%b'", "'_'", "'%'", "'a_'", "'\\%%'", "'%é%'", "''"]
TS_LITERALS = [
    "TIMESTAMP '2026-01-01 00:00:00'",
    "TIMESTAMP '2026-01-01 00:00:10'",
    "TIMESTAMP '2026-01-01 00:01:00'",
    "TIMESTAMP '2025-12-31 23:59:59'",
]
# CAST targets per category
CAST_TYPES = {
    INT: ["integer", "bigint"],
    DBL: ["double"],
    DEC: ["decimal(10, 2)", "decimal(6, 3)", "decimal(4, 0)"],
    STR: ["varchar"],
}


def literal(draw: Draw, cat: str) -> str:
    if draw(st.integers(0, 14)) == 0 and cat != BOOL:
        return "NULL" if cat in NUMERIC else f"CAST(NULL AS {_null_type(cat)})"
    options = {
        INT: INT_LITERALS,
        DBL: DBL_LITERALS,
        DEC: DEC_LITERALS,
        STR: STR_LITERALS,
        BOOL: ["TRUE", "FALSE"],
        TS: TS_LITERALS,
    }[cat]
    text: str = draw(st.sampled_from(options))
    return text


def _null_type(cat: str) -> str:
    return {STR: "varchar", TS: "timestamp", BOOL: "boolean"}.get(cat, "integer")


def leaf(draw: Draw, cat: str, fields: Sequence[Field]) -> str:
    mine = [f for f in fields if f.cat == cat]
    if mine and draw(st.integers(0, 3)) > 0:
        chosen: Field = draw(st.sampled_from(mine))
        return chosen.ref
    return literal(draw, cat)


def expr(draw: Draw, cat: str, fields: Sequence[Field], depth: int = 2) -> str:
    """An expression of category `cat` over `fields`, nested at most `depth` levels."""
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        return leaf(draw, cat, fields)
    sub = depth - 1
    make = {INT: _int, DBL: _double, DEC: _decimal, STR: _string, BOOL: _bool, TS: _timestamp}[cat]
    return make(draw, fields, sub)


def _common(draw: Draw, cat: str, fields: Sequence[Field], d: int) -> str | None:
    """Forms that any category has: CASE, coalesce, nullif; None to pick a category's own."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        cond = expr(draw, BOOL, fields, d)
        other = f" ELSE {expr(draw, cat, fields, d)}" if draw(st.booleans()) else ""
        return f"CASE WHEN {cond} THEN {expr(draw, cat, fields, d)}{other} END"
    if kind == 1:
        return f"coalesce({expr(draw, cat, fields, d)}, {expr(draw, cat, fields, d)})"
    if kind == 2 and cat != BOOL:
        return f"nullif({expr(draw, cat, fields, d)}, {expr(draw, cat, fields, d)})"
    return None


def _numeric_any(draw: Draw, fields: Sequence[Field], d: int) -> str:
    return expr(draw, draw(st.sampled_from(NUMERIC)), fields, d)


def _int(draw: Draw, fields: Sequence[Field], d: int) -> str:
    common = _common(draw, INT, fields, d)
    if common is not None:
        return common
    a = lambda: expr(draw, INT, fields, d)  # noqa: E731 - drawn lazily, only when used
    form = draw(st.integers(0, 11))
    if form <= 2:
        return f"({a()} {draw(st.sampled_from(['+', '-', '*', '%']))} {a()})"
    if form == 3:
        return f"(- {a()})"  # "--" would start a comment
    if form == 4:
        return f"{draw(st.sampled_from(['abs', 'round']))}({a()})"
    if form == 5:
        return f"mod({a()}, {a()})"
    if form == 6:
        src = draw(st.sampled_from([DBL, DEC, STR, INT]))
        return f"CAST({expr(draw, src, fields, d)} AS {draw(st.sampled_from(CAST_TYPES[INT]))})"
    if form == 7:
        return f"length({expr(draw, STR, fields, d)})"
    if form == 8:
        part = draw(st.sampled_from(["year", "month", "day", "hour", "minute", "second", "epoch_millis"]))
        return f"{part}({expr(draw, TS, fields, d)})"
    if form == 9:
        # of a double: a bigint (of a decimal it is a decimal, drawn by _decimal)
        return f"{draw(st.sampled_from(['floor', 'ceil']))}({expr(draw, DBL, fields, d)})"
    return f"{draw(st.sampled_from(['greatest', 'least']))}({a()}, {a()})"


def _double(draw: Draw, fields: Sequence[Field], d: int) -> str:
    common = _common(draw, DBL, fields, d)
    if common is not None:
        return common
    form = draw(st.integers(0, 7))
    if form <= 1:
        op = draw(st.sampled_from(["+", "-", "*", "/"]))
        return f"({expr(draw, DBL, fields, d)} {op} {_numeric_any(draw, fields, d)})"
    if form == 2:
        return f"({expr(draw, INT, fields, d)} / {expr(draw, INT, fields, d)})"
    if form == 3:
        return f"sqrt({_numeric_any(draw, fields, d)})"
    if form == 4:
        return f"power({_numeric_any(draw, fields, d)}, {draw(st.sampled_from(['2', '0.5', '-1', '0']))})"
    if form == 5:
        src = draw(st.sampled_from([INT, DEC, STR]))
        return f"CAST({expr(draw, src, fields, d)} AS double)"
    if form == 6:
        return f"round({expr(draw, DBL, fields, d)}, {draw(st.sampled_from(['0', '1', '2', '-1']))})"
    return f"abs({expr(draw, DBL, fields, d)})"


def _decimal(draw: Draw, fields: Sequence[Field], d: int) -> str:
    common = _common(draw, DEC, fields, d)
    if common is not None:
        return common
    form = draw(st.integers(0, 6))
    if form <= 2:
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        other = expr(draw, draw(st.sampled_from([DEC, INT])), fields, d)
        left, right = expr(draw, DEC, fields, d), other
        if draw(st.booleans()):
            left, right = right, left
        return f"({left} {op} {right})"
    if form == 3:
        src = draw(st.sampled_from([INT, DBL, STR, DEC]))
        return f"CAST({expr(draw, src, fields, d)} AS {draw(st.sampled_from(CAST_TYPES[DEC]))})"
    if form == 4:
        return f"round({expr(draw, DEC, fields, d)}, {draw(st.sampled_from(['0', '1', '2']))})"
    if form == 5:
        return f"{draw(st.sampled_from(['floor', 'ceil']))}({expr(draw, DEC, fields, d)})"
    return f"abs({expr(draw, DEC, fields, d)})"


def _string(draw: Draw, fields: Sequence[Field], d: int) -> str:
    common = _common(draw, STR, fields, d)
    if common is not None:
        return common
    s = lambda: expr(draw, STR, fields, d)  # noqa: E731
    form = draw(st.integers(0, 6))
    if form <= 1:
        return f"({s()} || {s()})"
    if form == 2:
        return f"{draw(st.sampled_from(['lower', 'upper', 'trim']))}({s()})"
    if form == 3:
        start = draw(st.sampled_from(["1", "2", "0", "-1"]))
        if draw(st.booleans()):
            return f"substring({s()}, {start})"
        return f"substring({s()}, {start}, {draw(st.sampled_from(['1', '2', '0']))})"
    if form == 4:
        src = draw(st.sampled_from([INT, DBL, DEC, BOOL, TS]))
        return f"CAST({expr(draw, src, fields, d)} AS varchar)"
    cat = draw(st.sampled_from(CATEGORIES))
    return f"concat({s()}, {expr(draw, cat, fields, d)})"


def _bool(draw: Draw, fields: Sequence[Field], d: int) -> str:
    """A predicate, parenthesized: `a = b IS NULL` does not parse, `(a = b) IS NULL` does."""
    return f"({_predicate(draw, fields, d)})"


def _predicate(draw: Draw, fields: Sequence[Field], d: int) -> str:
    form = draw(st.integers(0, 9))
    if form <= 2:
        cat = draw(st.sampled_from(ORDERED))
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        return f"{expr(draw, cat, fields, d)} {op} {expr(draw, cat, fields, d)}"
    if form == 3:
        cat = draw(st.sampled_from(CATEGORIES))
        return f"{expr(draw, cat, fields, d)} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if form == 4:
        cat = draw(st.sampled_from(NUMERIC))
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{expr(draw, cat, fields, d)} {neg}BETWEEN {expr(draw, cat, fields, d)} AND {expr(draw, cat, fields, d)}"
    if form == 5:
        cat = draw(st.sampled_from([INT, STR]))
        items = ", ".join(literal(draw, cat) for _ in range(draw(st.integers(1, 3))))
        return f"{expr(draw, cat, fields, d)} {draw(st.sampled_from(['', 'NOT ']))}IN ({items})"
    if form == 6:
        pattern = draw(st.sampled_from(LIKE_PATTERNS))
        return f"{expr(draw, STR, fields, d)} {draw(st.sampled_from(['', 'NOT ']))}LIKE {pattern}"
    if form == 7:
        op = draw(st.sampled_from(["AND", "OR"]))
        return f"({expr(draw, BOOL, fields, d)} {op} {expr(draw, BOOL, fields, d)})"
    if form == 8:
        return f"NOT ({expr(draw, BOOL, fields, d)})"
    return leaf(draw, BOOL, fields)


def _timestamp(draw: Draw, fields: Sequence[Field], d: int) -> str:
    common = _common(draw, TS, fields, d)
    if common is not None:
        return common
    millis = draw(st.sampled_from(["1767225600000", "1767225610000", "0", "-1000"]))
    return f"from_epoch_millis({draw(st.sampled_from([millis, expr(draw, INT, fields, d)]))})"


# ---- expressions that fail on some events ---------------------------------------------------------
# Every position where an engine evaluates an expression (WHERE, SELECT items, GROUP BY keys, HAVING,
# BATCH START and STOP, join conditions) is a failure path: the event (or the window's row, or the
# pair) is dead-lettered with the reason and the run goes on. `at` draws one such expression about
# one time in four: a failed CAST, a division by zero, an integer overflow, over the fields in scope
# so that it fails on some events and not on others (the inputs hold 0, the integer bounds, texts
# that are numbers and texts that are not).

FAILS_ONE_IN = 4


def at(draw: Draw, cat: str, fields: Sequence[Field], depth: int = 2) -> str:
    """An expression for a position the fuzzer means to make fail now and then (see above)."""
    if draw(st.integers(1, FAILS_ONE_IN)) == 1:
        return failing(draw, cat, fields)
    return expr(draw, cat, fields, depth)


def _of(draw: Draw, cat: str, fields: Sequence[Field]) -> str | None:
    """A field of `cat` in scope (so that the failure depends on the event), or None."""
    mine = [f.ref for f in fields if f.cat == cat]
    chosen: str | None = draw(st.sampled_from(mine)) if mine else None
    return chosen


def _failing_int(draw: Draw, fields: Sequence[Field]) -> str:
    """An integer expression that fails for some values of the fields in scope: the inputs hold 0,
    the integer bounds, 1e15 and texts that are numbers and texts that are not."""
    forms = []
    x = _of(draw, INT, fields)
    if x is not None:
        forms += [
            f"({x} * 9223372036854775807)",  # overflows for |x| > 1, integer or bigint
            f"({x} + 9223372036854775807)",  # ... for x > 0
            f"({x} * 2147483647)",  # an integer for |x| > 1, a bigint beyond 2^32
            f"mod(7, {x})",  # division by zero
            f"(7 % {x})",
            f"abs({x})",  # of the least integer
            f"CAST({x} AS integer)",  # a bigint beyond an integer
        ]
    text = _of(draw, STR, fields)
    if text is not None:
        forms += [f"CAST({text} AS integer)", f"CAST({text} AS bigint)"]  # 'a' fails, '10' does not
    for cat in (DBL, DEC):
        y = _of(draw, cat, fields)
        if y is not None:
            forms.append(f"CAST({y} AS integer)")  # 1e15, or a decimal beyond an integer
    if not forms:
        return "CAST('x' AS integer)"  # no field to depend on: fails on every event
    chosen: str = draw(st.sampled_from(forms))
    return chosen


def failing(draw: Draw, cat: str, fields: Sequence[Field]) -> str:
    """An expression of category `cat` that fails for some values of the fields in scope."""
    if cat == BOOL:
        inner = failing(draw, draw(st.sampled_from([INT, DBL, DEC])), fields)
        return f"({inner} {draw(st.sampled_from(['>', '<>', '<=']))} 1)"
    if cat == STR:
        return f"CAST({failing(draw, draw(st.sampled_from([INT, DBL, DEC])), fields)} AS varchar)"
    if cat == TS:
        return f"from_epoch_millis({_failing_int(draw, fields)} * 1000)"
    if cat == DBL:
        x = _of(draw, INT, fields)
        text = _of(draw, STR, fields)
        forms = [f"CAST({_failing_int(draw, fields)} AS double)"]
        forms += [f"(7 / {x})"] if x is not None else []  # division by zero
        forms += [f"CAST({text} AS double)"] if text is not None else []
        chosen: str = draw(st.sampled_from(forms))
        return chosen
    if cat == DEC:
        text = _of(draw, STR, fields)
        y = _of(draw, DBL, fields)
        forms = [f"CAST({_failing_int(draw, fields)} AS decimal(10, 2))"]
        forms += [f"CAST({text} AS decimal(6, 2))"] if text is not None else []
        forms += [f"CAST({y} AS decimal(4, 0))"] if y is not None else []
        chosen = draw(st.sampled_from(forms))
        return chosen
    return _failing_int(draw, fields)
