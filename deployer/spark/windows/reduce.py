"""Aggregates over the windows a TUPLE or BATCH window fires, as numpy reductions over a matrix.

Shared by the per-group state (deployer.spark.windows.window_state) and the per-bucket one
(deployer.spark.windows.tuple_buckets): a (windows x size) matrix of values and one of validity (not NULL)
reduce to one result per window, with SQL's NULL rules and the reference executor's values: exact
integer sums and decimals (operators.decimals), and the same overflow, which makes the window's row
an error (docs/language.md, "Aggregates").
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from operators import decimals
from operators import expr as ir
from operators.datatypes import DataType
from operators.values import INT_RANGES, EvalError, overflow_reason


@dataclass(frozen=True)
class AggSpec:
    """One aggregate of a window as the Python operators compute it (picklable, sent to Spark's
    workers): the function, the buffer column of its values (None for count(*)), its result type and
    its argument's, and its CPL text, which the reason a window's row is dead-lettered names when its
    value overflows."""

    func: str
    column: str | None
    result: DataType
    arg: DataType | None
    what: str  # the aggregate as CPL, for its error

    @property
    def reason(self) -> str:
        return overflow_reason(self.what, self.result)


def agg_spec(agg: ir.Agg, column: str | None) -> AggSpec:
    arg = agg.arg.type if agg.arg is not None else None
    return AggSpec(agg.func, column, agg.type, arg, agg.to_cpl())


# |value| * count below this: an int64 sum of the values cannot overflow.
_SAFE = float(2**62)


def reduce_windows(spec: AggSpec, values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, ...]:
    """Reduce each row of a (windows x size) matrix with SQL null semantics: the results, which are
    NULL, and which overflowed their type (those are NULL too)."""
    func = spec.func
    n_valid = valid.sum(axis=1)
    none = np.zeros(len(values), dtype=bool)
    if func == "count":
        return n_valid, none, none
    empty = n_valid == 0
    if values.dtype.kind not in "iuf":  # decimals, strings, timestamps, booleans: exact, per window
        return _exact(spec, values, valid)
    if func in ("min", "max"):
        return _extreme(func, values, valid), empty, none
    if (
        values.dtype.kind in "iu"
        and np.abs(values.astype(np.float64)).max(initial=0) * values.shape[1] >= _SAFE
    ):
        return _exact(spec, values.astype(object), valid)  # int64 could overflow: Python's ints
    total = np.where(valid, values, 0).sum(axis=1)
    if func == "sum":
        return total, empty, none
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / np.maximum(n_valid, 1), empty, none


def _extreme(func: str, values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    floating = values.dtype.kind == "f"
    if func == "min":
        return np.where(valid, values, np.inf if floating else np.iinfo(np.int64).max).min(axis=1)
    return np.where(valid, values, -np.inf if floating else np.iinfo(np.int64).min).max(axis=1)


def _exact(spec: AggSpec, values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, ...]:
    out: list[Any] = []
    null: list[bool] = []
    failed: list[bool] = []
    for row, ok in zip(values, valid, strict=True):
        # numpy's integers wrap on overflow where the language's fail: Python's ints (a bigint column
        # with a NULL comes as numpy scalars in an object column)
        xs = [v.item() if isinstance(v, np.generic) else v for v, k in zip(row, ok, strict=True) if k]
        try:
            value = _value(spec, xs) if xs else None
        except EvalError:
            value = None
            failed.append(True)
        else:
            failed.append(False)
        out.append(value)
        null.append(value is None)
    return np.array(out, dtype=object), np.array(null, dtype=bool), np.array(failed, dtype=bool)


def _value(spec: AggSpec, xs: list[Any]) -> Any:
    """One window's aggregate of its non-NULL values `xs`, as deployer.local.windows computes it."""
    if spec.func in ("min", "max"):
        return min(xs) if spec.func == "min" else max(xs)
    total = xs[0]
    for x in xs[1:]:
        total = decimals.exact_sum(total, x) if isinstance(total, Decimal) else total + x
    t = spec.result
    if spec.func == "avg":
        if isinstance(total, Decimal):
            assert spec.arg is not None
            return decimals.average(total, len(xs), spec.arg, t, spec.what)
        return float(total) / len(xs)
    if isinstance(total, Decimal):
        return decimals.rounded(total, t, lambda: spec.what)
    if t.kind in INT_RANGES and not INT_RANGES[t.kind][0] <= total <= INT_RANGES[t.kind][1]:
        raise EvalError(spec.reason)
    return total
