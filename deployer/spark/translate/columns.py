"""The IR's types and fields as Spark sees them, and the text of values and error messages.

Inside a translated graph every DataFrame names its columns by position (`_0`, `_1`, ...; a join's
right side `_r0`, ...), so user field names, whatever characters they hold, are never resolved by
Spark's parser; real names are applied only when results leave the engine. A value's text and an
error's message are built as the reference executor writes them, so both engines dead-letter an
event with the same reason.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark import functions
from operators import graph as g
from operators.datatypes import DataType, Schema


def spark_type(t: DataType) -> T.DataType:
    k = t.kind
    if k == "boolean":
        return T.BooleanType()
    if k == "integer":
        return T.IntegerType()
    if k == "bigint":
        return T.LongType()
    if k == "double":
        return T.DoubleType()
    if k == "decimal":
        return T.DecimalType(t.precision or 38, t.scale or 0)
    if k == "timestamp":
        return T.TimestampType()
    if k == "null":
        return T.StringType()
    return T.StringType()


def struct_of(schema: Schema, prefix: str = "_") -> T.StructType:
    return T.StructType(
        [T.StructField(f"{prefix}{i}", spark_type(f.type), True) for i, f in enumerate(schema)]
    )


def col_name(index: int, side: int = 0) -> str:
    return f"_{index}" if side == 0 else f"_r{index}"


Message = Column | str  # an error message: fixed text, or text built from the failing values
# The message of an error whose message, built from its values, could not be made (one is NULL).
UNSHOWN = "the expression failed on a value it cannot show"


def text(c: Column, t: DataType | None = None) -> Column:
    """The varchar form of a value of type `t`, as the reference executor's `to_text` gives it:
    booleans as true/false, timestamps as `yyyy-MM-dd HH:mm:ss[.ffffff]` (trailing zeros cut),
    decimals in plain notation, doubles as Python prints them (`repr`)."""
    if t is not None and t.kind == "double":
        return double_text(c)
    if t is not None and t.kind == "decimal":
        return decimal_text(c, t)
    return c.cast("string")


def decimal_text(c: Column, t: DataType) -> Column:
    """A decimal in plain notation with its type's places, as Python's format(d, "f") writes the
    reference's values: Spark's own text is Java's BigDecimal.toString, which writes 0.00000001 as
    1E-8. format_number is exact for decimals (java.text.DecimalFormat of the BigDecimal)."""
    return F.regexp_replace(F.format_number(c, t.scale or 0), ",", "")


def double_text(c: Column) -> Column:
    """Python's repr of a double, as the reference writes it (`10000000.0`, `1.5e-05`,
    `9.223372034707292e+18`, `nan`): deployer/spark/functions' `cep_double_text`. Spark's own text
    is Java 17's (`1.0E7`, `1.5E-5`, and digits that are sometimes not the shortest)."""
    return functions.column(functions.DOUBLE_TEXT, c)


def msg(*parts: Column | str) -> Column:
    return F.concat(*[F.lit(p) if isinstance(p, str) else p for p in parts])


def quoted(c: Column) -> Column:
    """Text as a CPL string literal, as the reference's reasons quote it (`operators.values.sql_quoted`)."""
    return msg("'", F.replace(c, F.lit("'"), F.lit("''")), "'")


def encoded_value(value: Column, t: T.DataType) -> Column:
    """One value as text tagged with its kind, exact, so that the writer can rebuild it: dead letters
    of different operators (different event types) then share one DataFrame schema and one query."""
    if isinstance(t, T.IntegerType | T.LongType | T.ShortType | T.ByteType):
        tag, body = "i", value.cast("string")
    elif isinstance(t, T.DoubleType | T.FloatType):
        tag, body = "f", value.cast("string")  # Java's text reads back as the same double
    elif isinstance(t, T.DecimalType):
        tag, body = "n", value.cast("string")
    elif isinstance(t, T.BooleanType):
        tag, body = "b", value.cast("string")
    elif isinstance(t, T.TimestampType):
        tag, body = "t", F.unix_micros(value).cast("string")
    else:
        tag, body = "s", value.cast("string")
    return F.concat(F.lit(tag), body)


def encoded_event(values: list[tuple[Column, T.DataType]]) -> Column:
    """An event as a dead letter carries it: its values as tagged text (`encoded_value`), in order.
    Built where the event's columns are at hand, when a failure is found where they are not (a
    BATCH window's condition, failing inside the window's state: deployer.spark.windows.window_state)."""
    return F.array(*[encoded_value(v, t) for v, t in values])


def error_column(errors: list[tuple[Column, Message]]) -> Column | None:
    """One column holding the first error message of a row, NULL when it has none: never NULL
    when one of the conditions holds (a message made of values is given a fixed text if one of them
    is NULL), so that the rows it is NULL for are exactly those no condition holds for, which is how
    SparkGraph.split_errors filters the rows that go on."""
    if not errors:
        return None
    out: Column | None = None
    for cond, message in errors:
        text = F.lit(message) if isinstance(message, str) else F.coalesce(message, F.lit(UNSHOWN))
        out = F.when(cond, text) if out is None else out.when(cond, text)
    assert out is not None
    return out


def carried(fields: list[T.StructField], df: DataFrame) -> list[T.StructField]:
    """`fields` with the metadata of `df`'s columns of the same names: a Python operator's output
    (`mapInArrow`) names its columns anew, and the event-time column's metadata is what tells the
    stateful operators downstream where the stream's watermark is (deployer.spark.streams.sources)."""
    meta = {f.name: f.metadata for f in df.schema.fields if f.metadata}
    return [
        T.StructField(f.name, f.dataType, f.nullable, meta[f.name]) if f.name in meta else f for f in fields
    ]


def where_failed(node: g.Node) -> dict[str, Any]:
    """What the dead letters of `node`'s failed rows say of where: stage, stream (a source's), node, line."""
    stream = node.stream if isinstance(node, g.Source) else None
    return {"stage": node.op, "stream": stream, "node": node.id, "line": node.line}
