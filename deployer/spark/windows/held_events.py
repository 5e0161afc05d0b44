"""How the events a TUPLE or BATCH window holds cross into its processor and between pandas and its
state (deployer.spark.windows.window_state): as plain Python values of the buffer's types, exactly.

PySpark hands a processor an integer column with a NULL as Python ints and NA (the session's
preferIntExtensionDtype: deployer.spark.run.session), and the state gives its arrays back as Python
values; pandas would make an integer column with a None floats, which round a bigint above 2**53.
But PySpark makes such a bigint column from Arrow through pandas' `astype` from Arrow's type, which
rounds some values all the same when the column has a NULL (PySpark 4.3, pandas 2.3:
-9223372036854775807 became -9223372036854775808, found by the differential fuzzer, seed 3511): so
bigint columns cross into the processor as text (`longs_as_text`), read back exactly (`exact_longs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

if TYPE_CHECKING:
    import pandas as pd


INTEGRAL = (T.IntegerType, T.LongType, T.ShortType, T.ByteType)


def held_events(buf_schema: T.StructType, columns: Any) -> pd.DataFrame:
    """The events the state holds, column by column: an integer column with a NULL as Python
    objects, as the new events come (pandas would make it floats, rounding a bigint above 2**53)."""
    import pandas as pd  # not at the top: each query start imports this module (architecture.md)

    data = {
        f.name: pd.Series(list(vs), dtype=object)
        if isinstance(f.dataType, INTEGRAL) and any(v is None for v in vs)
        else pd.Series(list(vs))
        for f, vs in zip(buf_schema.fields, columns, strict=True)
    }
    return pd.DataFrame(data, columns=buf_schema.names)


def _to_state(t: T.DataType) -> Any:
    """The Python type a buffer column's values must have in the state; None: as they are."""
    if isinstance(t, INTEGRAL):
        return int
    if isinstance(t, T.DoubleType | T.FloatType):
        return float
    if isinstance(t, T.BooleanType):
        return bool
    return None


# The numpy dtype kind whose `tolist()` already gives each Python type.
_NUMPY_KIND = {int: "i", float: "f", bool: "b"}


def state_columns(buf_schema: T.StructType, rest: pd.DataFrame) -> list[list[Any]]:
    """The buffer's columns as lists of plain Python values of the buffer's types: NA, NaN and NaT
    as None, numpy scalars as Python's (a session without preferIntExtensionDtype hands an integer
    column with a NULL over as floats, which go back as ints). The buffer holds no timestamps: they
    are kept as epoch microseconds."""
    import pandas as pd  # not at the top: each query start imports this module (architecture.md)

    out: list[list[Any]] = []
    for f in buf_schema.fields:
        column = rest[f.name]
        fn = _to_state(f.dataType)
        values = column.tolist()
        if column.isna().any():
            values = [None if pd.isna(v) else (fn(v) if fn is not None else v) for v in values]
        elif fn is not None and column.dtype.kind != _NUMPY_KIND.get(fn, column.dtype.kind):
            values = [fn(v) for v in values]
        out.append(values)
    return out


def longs_as_text(df: DataFrame) -> tuple[DataFrame, tuple[str, ...]]:
    """`df` with its bigint columns as decimal text, and their names (see the module docstring)."""
    longs = tuple(f.name for f in df.schema.fields if isinstance(f.dataType, T.LongType))
    if not longs:
        return df, ()
    return df.select(
        *[F.col(c).cast("string").alias(c) if c in longs else F.col(c) for c in df.columns]
    ), longs


def exact_longs(frame: pd.DataFrame, longs: tuple[str, ...]) -> None:
    """The columns `longs` of a processor's rows (`longs_as_text`) back to bigints, exactly, in place:
    pandas' nullable integers made from Python ints (not from text or objects with `astype`, which
    goes through floats when a value is missing)."""
    import pandas as pd  # not at the top: each query start imports this module (architecture.md)

    for c in longs:
        frame[c] = pd.array(
            [None if v is None or v is pd.NA else int(v) for v in frame[c].tolist()], dtype="Int64"
        )
