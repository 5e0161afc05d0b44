"""Aggregates over the windows a TUPLE or BATCH window fires, as numpy reductions over a matrix.

Shared by the per-group state (deployer.spark.window_state) and the per-bucket one
(deployer.spark.tuple_buckets): a (windows x size) matrix of values and one of validity (not NULL)
reduce to one result per window, with SQL's NULL rules and the reference executor's exact decimals.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np

from operators.values import DECIMAL_CONTEXT


def reduce_windows(
    func: str, values: np.ndarray, valid: np.ndarray, scale: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Reduce each row of a (windows x size) matrix with SQL null semantics; returns values, is-null.

    `scale` is the result scale of a decimal avg, rounded half up as the reference executor does."""
    n_valid = valid.sum(axis=1)
    if func == "count":
        return n_valid, np.zeros(len(values), dtype=bool)
    empty = n_valid == 0
    if values.dtype.kind not in "iuf":  # decimals, strings, timestamps, booleans: exact, per window
        out: list[Any] = []
        for row, ok in zip(values, valid, strict=True):
            xs = [v for v, k in zip(row, ok, strict=True) if k]
            if not xs:
                out.append(None)
            elif func == "sum":
                out.append(_exact_sum(xs))
            elif func == "avg":
                total = _exact_sum(xs)
                if isinstance(total, Decimal):
                    q = DECIMAL_CONTEXT.divide(total, len(xs))
                    out.append(q.quantize(Decimal(1).scaleb(-(scale or 0)), context=DECIMAL_CONTEXT))
                else:
                    out.append(float(total) / len(xs))
            else:
                out.append(min(xs) if func == "min" else max(xs))
        return np.array(out, dtype=object), empty
    if func in ("sum", "avg"):
        total = np.where(valid, values, 0).sum(axis=1)
        if func == "sum":
            return total, empty
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / np.maximum(n_valid, 1), empty
    if func == "min":
        return np.where(valid, values, np.inf if values.dtype.kind == "f" else np.iinfo(np.int64).max).min(
            axis=1
        ), empty
    return np.where(valid, values, -np.inf if values.dtype.kind == "f" else np.iinfo(np.int64).min).max(
        axis=1
    ), empty


def _exact_sum(xs: list[Any]) -> Any:
    total = xs[0]
    for x in xs[1:]:
        total = DECIMAL_CONTEXT.add(total, x) if isinstance(total, Decimal) else total + x
    return total
