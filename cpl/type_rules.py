"""SQL typing rules that need no scope: type names → `DataType`, timestamp literals, casts of
literals folded at compile time, and the types of arithmetic (decimals: operators.decimals)."""

from __future__ import annotations

from datetime import UTC, datetime

from cpl import syntax_tree as ast
from cpl.errors import TypeCheckError
from operators import expr as ir
from operators.datatypes import (
    BIGINT,
    DECIMAL,
    DOUBLE,
    INTEGER,
    NULL,
    T_DOUBLE,
    T_TIMESTAMP,
    TIMESTAMP,
    TYPE_ALIASES,
    DataType,
    wider_numeric,
)
from operators.decimals import arithmetic_type, operand_type, remainder_too_wide
from operators.values import EvalError, cast_value


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


def arithmetic_result(op: str, left: ir.Expr, right: ir.Expr, pos: ast.Pos) -> DataType:
    """The type of `left op right` (both numbers or NULL): a double when either is one; integers
    keep the wider kind, but `/` gives a double (7 / 2 = 3.5, as in Spark); with a decimal, the
    decimal rules of operators.decimals (an integer operand counting as its `operand_type`)."""
    kinds = {left.type.kind, right.type.kind}
    if DOUBLE in kinds:
        return T_DOUBLE
    if DECIMAL not in kinds:
        t = wider_numeric(left.type, right.type)
        return T_DOUBLE if op == "/" and t.kind in (INTEGER, BIGINT) else t
    if NULL in kinds:  # NULL op decimal: NULL, of the decimal's type
        return left.type if left.type.kind == DECIMAL else right.type
    a, b = operand_type(left), operand_type(right)
    if op == "%" and remainder_too_wide(a, b):
        raise TypeCheckError(
            f"{a} % {b} cannot be computed exactly: its quotient may need more than 38 digits; "
            "CAST an operand to a narrower decimal",
            pos,
        )
    return arithmetic_type(op, a, b)


def numeric_view(exprs: list[ir.Expr]) -> list[DataType]:
    """The types of values that may meet in one result (CASE branches, coalesce, greatest, ...):
    beside a decimal (and no double), an integer literal counts as a decimal of its digits, so
    that coalesce(price, 0) keeps the type of `price`."""
    kinds = {e.type.kind for e in exprs}
    if DECIMAL not in kinds or DOUBLE in kinds:
        return [e.type for e in exprs]
    return [
        operand_type(e) if isinstance(e, ir.Lit) and e.type.kind in (INTEGER, BIGINT) else e.type
        for e in exprs
    ]


def coerce_timestamp_literals(a: ir.Expr, b: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
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


def fold_cast(lit: ir.Lit, to: DataType) -> ir.Expr | None:
    """Casts of literals are folded at compile time, so CAST('1.5' AS decimal(4,2)) is a constant."""
    v = lit.value
    try:
        if to.kind == DECIMAL and isinstance(v, str | int | float) and not isinstance(v, bool):
            # as CAST computes it at run time; a value that does not fit is left to fail there,
            # for the events that evaluate it (as a CASE branch not taken does not)
            return ir.Lit(to, cast_value(v, to))
        if to.kind == DOUBLE and isinstance(v, str | int | float) and not isinstance(v, bool):
            return ir.Lit(to, float(v))
        if to.kind == TIMESTAMP and isinstance(v, str):
            ts = parse_timestamp(v)
            return ir.Lit(to, ts) if ts is not None else None
    except (EvalError, ValueError):
        return None
    return None
