"""Arrow tables (how Spark hands a micro-batch to the driver) as the Python values of stores/api.py.

Column by column: numbers without NULLs through numpy, timestamps through pandas, so a batch of
200,000 rows converts in tens of milliseconds instead of the seconds that one Python object per
value through `to_pylist` (or Spark's `toLocalIterator`) cost. Timestamps become aware UTC
datetimes; a timestamp beyond year 9999, which Spark allows and Python's datetime does not,
becomes ISO text with a `Z`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from operators.values import from_micros


def micros_value(us: int | None) -> Any:
    """Epoch microseconds as an aware UTC datetime (text beyond year 9999); None stays None."""
    if us is None:
        return None
    try:
        return from_micros(us)
    except OverflowError:
        return str(np.datetime_as_string(np.datetime64(us, "us"))) + "Z"


def column_values(col: pa.ChunkedArray | pa.Array) -> list[Any]:
    """The Python values of one Arrow column."""
    t = col.type
    if pa.types.is_timestamp(t):
        return _timestamps(col.cast(pa.int64()))
    if col.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        return list(col.to_numpy().tolist())
    return list(col.to_pylist())


def rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows of a table as tuples of Python values."""
    if table.num_columns == 0:
        return [()] * table.num_rows
    return list(zip(*(column_values(c) for c in table.columns), strict=True))


def _timestamps(micros: pa.ChunkedArray | pa.Array) -> list[Any]:
    # pandas only where timestamps are converted: a Python source's reader imports this module (its
    # dead letters: deployer.spark.streams.task_spool) in a fresh process at every query start,
    # where pandas alone took ~0.3 s (tests/architecture/test_worker_imports.py)
    import pandas as pd

    try:
        values: list[Any] = list(
            pd.to_datetime(micros.fill_null(0).to_numpy(), unit="us", utc=True).to_pydatetime()
        )
    except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
        return [micros_value(v) for v in micros.to_pylist()]
    if micros.null_count:
        for i, valid in enumerate(micros.is_valid().to_pylist()):
            if not valid:
                values[i] = None
    return values
