"""Durations and windows: a `WindowSpec` (TUPLE, TIME or BATCH, written in FROM or declared with
CREATE WINDOW) → a validated `g.Window`."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_state import PlanState
from cpl.scope import Scope
from cpl.typecheck import Checker
from operators import graph as g

UNITS_MS = {
    "millisecond": 1,
    "milliseconds": 1,
    "ms": 1,
    "second": 1000,
    "seconds": 1000,
    "sec": 1000,
    "minute": 60_000,
    "minutes": 60_000,
    "min": 60_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "day": 86_400_000,
    "days": 86_400_000,
}


def duration_ms(d: ast.Duration, zero: bool = False) -> int:
    """A duration in milliseconds; positive, or also 0 where `zero` allows it (a WATERMARK: 0 is its
    default, and writing the default out must not be an error)."""
    unit = UNITS_MS.get(d.unit)
    if unit is None:
        raise PlanError(
            f"unknown time unit '{d.unit}'; use MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS", d.pos
        )
    if d.amount < 0 or (d.amount == 0 and not zero):
        raise PlanError("a duration must be positive" + (" or 0" if zero else ""), d.pos)
    return d.amount * unit


def plan_window(spec: ast.WindowSpec, scope: Scope | None, name: str | None = None) -> g.Window:
    """The window of `spec`. A BATCH window's START/STOP conditions are checked against `scope`;
    without one (a CREATE WINDOW, validated before any use) they are left out."""
    if spec.kind == "batch":
        assert spec.start is not None and spec.stop is not None
        if scope is None:
            return g.Window("batch", name=name)
        checker = Checker(scope)
        start = checker.check_bool(spec.start, "a BATCH START condition")
        stop = checker.check_bool(spec.stop, "a BATCH STOP condition")
        return g.Window("batch", start=start, stop=stop, name=name)
    if spec.kind == "tuple":
        assert isinstance(spec.size, int)
        size = spec.size
        advance = spec.advance if isinstance(spec.advance, int) else size
        if size <= 0 or advance <= 0:
            raise PlanError("a TUPLE window needs a positive SIZE and ADVANCE", spec.pos)
        return g.Window("tuple", size, advance, name=name)
    assert isinstance(spec.size, ast.Duration)
    size = duration_ms(spec.size)
    advance = duration_ms(spec.advance) if isinstance(spec.advance, ast.Duration) else size
    if advance > size:
        raise PlanError("a TIME window's ADVANCE cannot be larger than its SIZE", spec.pos)
    return g.Window("time", size, advance, name=name)


def resolve_window(state: PlanState, item: ast.FromItem, scope: Scope) -> g.Window:
    """The window of an input: written in place, or named and declared with CREATE WINDOW."""
    if isinstance(item.window, str):
        found = state.windows.get(item.window.lower())
        if found is None:
            raise PlanError(f"unknown window '{item.window}'; declare it with CREATE WINDOW", item.window_pos)
        return plan_window(found[0], scope, item.window)
    assert isinstance(item.window, ast.WindowSpec)
    return plan_window(item.window, scope)
