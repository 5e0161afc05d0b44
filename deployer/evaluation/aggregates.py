"""Aggregate accumulators: count, sum, avg, min and max over a window's events (deployer.local.windows)
or a pattern's collected ones (deployer.patterns), with SQL's NULL rules, exact sums, and the
overflow of a sum or an average as an error of the row (docs/language.md, "Aggregates")."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from operators import decimals
from operators import expr as ir
from operators.datatypes import BIGINT, DECIMAL, DOUBLE, INTEGER
from operators.values import INT_RANGES, EvalError, overflow_reason

Values = tuple[Any, ...]  # one event's aggregate arguments (True for count(*))


class Aggregates:
    """The aggregate calls of one Aggregate node: per-event arguments, states and results.

    A state is a list with one slot per call: a count for count, the running sum (None until a
    non-NULL value arrives) for sum, [sum, count] for avg, the extreme so far for min and max.
    NULL arguments are ignored, so sum/avg/min/max of no non-NULL value are NULL (SQL).
    """

    def __init__(self, aggs: tuple[ir.Agg, ...], compile_arg: Callable[[ir.Expr], Callable[[Any], Any]]):
        self.aggs = aggs
        self.args = [compile_arg(a.arg) if a.arg is not None else None for a in aggs]

    def arguments(self, event: tuple[Any, ...]) -> Values:
        return tuple(True if f is None else f(event) for f in self.args)

    def new_state(self) -> list[Any]:
        return [0 if a.func == "count" else [None, 0] if a.func == "avg" else None for a in self.aggs]

    def add(self, state: list[Any], values: Values) -> None:
        for i, (agg, v) in enumerate(zip(self.aggs, values, strict=True)):
            if v is None:
                continue
            func = agg.func
            if func == "count":
                state[i] += 1
            elif func == "sum":
                state[i] = v if state[i] is None else _add(state[i], v)
            elif func == "avg":
                s = state[i]
                s[0] = v if s[0] is None else _add(s[0], v)
                s[1] += 1
            elif func == "min":
                if state[i] is None or v < state[i]:
                    state[i] = v
            elif state[i] is None or v > state[i]:  # max
                state[i] = v

    def result(self, state: list[Any]) -> tuple[Values, str | None]:
        """The aggregate values of a window, and why it cannot be emitted: a sum or average that
        does not fit its type is an error for the window's row (docs/language.md, "Aggregates"),
        which is then dead-lettered with that aggregate NULL; the first such error is the reason."""
        out: list[Any] = []
        error: str | None = None
        for agg, s in zip(self.aggs, state, strict=True):
            try:
                out.append(_value(agg, s))
            except EvalError as err:
                out.append(None)
                error = error or str(err)
        return tuple(out), error

    def fold(self, events: list[Values]) -> list[Any]:
        state = self.new_state()
        for v in events:
            self.add(state, v)
        return state


def _value(agg: ir.Agg, s: Any) -> Any:
    """One aggregate's value from its state (see `Aggregates`)."""
    t = agg.type
    if agg.func == "avg":
        total, n = s
        if n == 0:
            return None
        if t.kind == DECIMAL:
            assert agg.arg is not None
            return decimals.average(total, n, agg.arg.type, t, agg.to_cpl())
        return float(total) / n
    if agg.func != "sum" or s is None:
        return s
    if t.kind in (INTEGER, BIGINT):
        lo, hi = INT_RANGES[t.kind]
        if not lo <= s <= hi:
            raise EvalError(overflow_reason(agg.to_cpl(), t))
        return s
    if t.kind == DECIMAL:
        return decimals.rounded(s, t, agg.to_cpl)
    return float(s) if t.kind == DOUBLE else s


def _add(a: Any, b: Any) -> Any:
    # Exact: a decimal total is checked against its type only at the end (`_value`).
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return decimals.exact_sum(a, b)
    return a + b
