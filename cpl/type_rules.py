"""SQL typing rules that need no scope: type names → `DataType`, timestamp literals, casts of
literals folded at compile time, and the scale of decimal arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from cpl import syntax_tree as ast
from cpl.errors import TypeCheckError
from operators import expr as ir
from operators.datatypes import DECIMAL, DOUBLE, T_TIMESTAMP, TIMESTAMP, TYPE_ALIASES, DataType


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


def _scale(t: DataType) -> int:
    return (t.scale or 0) if t.kind == DECIMAL else 0


def decimal_result(op: str, a: DataType, b: DataType, wide: DataType) -> DataType:
    """Decimal result scales, as the evaluator computes them: a product keeps every digit
    (s1 + s2), a quotient is rounded to at least 6 places, + - % keep the wider scale."""
    if op == "*":
        return DataType(DECIMAL, precision=38, scale=min(38, _scale(a) + _scale(b)))
    if op == "/":
        return DataType(DECIMAL, precision=38, scale=max(wide.scale or 0, 6))
    return wide


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
