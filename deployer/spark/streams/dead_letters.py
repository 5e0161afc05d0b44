"""Dead letters on Spark: every record or event that cannot be processed, with the reason, as JSON lines.

One shape for every dead letter (`dead_letter_frame`), so that the dead letters of different
operators (different event types) share one DataFrame schema and one query; written with the same
keys and values as the local engine's (deployer.local.driver).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.connectors.files import file_dir
from deployer.connectors.records import json_value
from deployer.spark.translate.columns import encoded_event
from stores.arrow import column_values, micros_value

# The key order of the local engine's dead letters (deployer.local.driver), so both write the same JSON.
DEAD_KEYS = ("stage", "reason", "stream", "node", "line", "source", "record")


def decoded(x: str | None) -> Any:
    if x is None:
        return None
    tag, text = x[0], x[1:]
    if tag == "i":
        return int(text)
    if tag == "f":
        return float(text)
    if tag == "n":
        return Decimal(text)
    if tag == "b":
        return text == "true"
    if tag == "t":
        return micros_value(int(text))
    return text


def dead_letter_frame(df: DataFrame, fixed: dict[str, Any]) -> DataFrame:
    """A dead-letter DataFrame in the one shape every dead letter takes: stage, reason, stream,
    node, line, source, record and the event as tagged text (`columns.encoded_value`). `fixed` fills what
    the rows do not carry."""
    return df.select(*dead_letter_columns(df, fixed))


def dead_letter_columns(df: DataFrame, fixed: dict[str, Any]) -> list[Column]:
    """The columns of `dead_letter_frame` over the rows of `df`."""
    cols: list[Column] = []
    # the schema once: each `df.columns` is a round trip to the JVM and a parse of its JSON
    schema = df.schema
    present = set(schema.names)
    for key in DEAD_KEYS:
        given = F.col(key) if key in present else None
        default = fixed.get(key)
        t = T.IntegerType() if key == "line" else T.StringType()
        col = F.lit(default).cast(t) if given is None else F.coalesce(given.cast(t), F.lit(default).cast(t))
        cols.append(col.alias(key))
    if "event" in present and isinstance(schema["event"].dataType, T.ArrayType):
        cols.append(F.col("event"))  # already encoded (`encoded_event`)
    elif "event" in present:
        struct = schema["event"].dataType
        assert isinstance(struct, T.StructType)
        ev = F.col("event")
        items = [(ev.getField(f.name), f.dataType) for f in struct.fields]
        cols.append(F.when(ev.isNotNull(), encoded_event(items)).alias("event"))
    else:
        cols.append(F.lit(None).cast(T.ArrayType(T.StringType())).alias("event"))
    return cols


class DeadLetterWriter:
    """foreachBatch for rejected records and failed events; the same JSON as the local engine's.

    A batch is a `dead_letter_frame`, or any DataFrame of `reason` and `event` (a struct of the
    event's values) and the other keys, which is made one with `fixed`; or, given to `lines`, the
    dead letters already made (`arrow_letters`). `counted` is told how many were written, late
    events aside (the run counts those apart: deployer.spark.streams.sources)."""

    def __init__(
        self,
        directory: Path | None,
        name: str,
        fixed: dict[str, Any] | None = None,
        counted: Callable[[int], None] | None = None,
    ) -> None:
        """The writer of failure point `name`'s dead letters, into `directory` (None: the console)."""
        self.directory, self.name, self.fixed, self.counted = directory, name, fixed or {}, counted

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if df.columns != [*DEAD_KEYS, "event"] or isinstance(df.schema["event"].dataType, T.StructType):
            df = dead_letter_frame(df, self.fixed)
        # One Spark job for the whole batch (toLocalIterator runs one per partition, and a union of
        # many operators' dead letters has many), Arrow's columns as Python values.
        rows = df.toArrow().to_pylist()
        late = sum(row["stage"] == "late" for row in rows)
        self.lines([dead_letter_line(row) for row in rows], batch_id, late)

    def lines(self, lines: list[str], batch_id: int, late: int = 0) -> None:
        """A batch's dead letters, made already; `late` of them late events."""
        if self.counted is not None:
            self.counted(len(lines) - late)
        write_dead_letters(self.directory, self.name, batch_id, lines)


def arrow_letters(
    failed: pa.RecordBatch, reason: str, event: str, fixed: dict[str, Any], per_row: Sequence[str] = ()
) -> list[str]:
    """The dead letters of failed rows from their Arrow columns: the reason in `reason`, the event
    in `event` (a struct of its values, or already encoded: `columns.encoded_event`), the other
    keys from `fixed`, or from the columns `per_row` where not NULL. The lines `DeadLetterWriter`
    makes of a `dead_letter_frame` of the same rows: the same Python values of the same columns,
    with no Spark job to make them (a task that spools, the driver that splits a collected batch)."""
    given = {key: failed.column(key).to_pylist() for key in per_row}
    reasons = failed.column(reason).to_pylist()
    events = _events(failed.column(event))
    lines = []
    for i, (why, ev) in enumerate(zip(reasons, events, strict=True)):
        keys = {key: fixed.get(key) for key in DEAD_KEYS} | {"reason": why}
        for key, values in given.items():
            if values[i] is not None:
                keys[key] = values[i]
        for key, value in keys.items():  # as `dead_letter_columns` casts them
            if value is not None:
                keys[key] = int(value) if key == "line" else str(value)
        lines.append(dead_letter_json(keys, ev))
    return lines


def _events(column: pa.Array) -> list[list[Any] | None]:
    """Each row's event as Python values: from a struct of its values, or from the tagged text of
    one already encoded (`columns.encoded_event`); None where the row has none."""
    if pa.types.is_struct(column.type):
        values = list(zip(*(column_values(pa.chunked_array([f])) for f in column.flatten()), strict=True))
        return [list(v) if ok else None for ok, v in zip(column.is_valid().to_pylist(), values, strict=True)]
    if pa.types.is_list(column.type):
        return [None if e is None else [decoded(x) for x in e] for e in column.to_pylist()]
    return [None] * len(column)


def dead_letter_line(row: dict[str, Any]) -> str:
    """The JSON line of a row of a `dead_letter_frame` (as Arrow gives it to Python)."""
    event = row["event"]
    return dead_letter_json(row, None if event is None else [decoded(x) for x in event])


def dead_letter_json(keys: dict[str, Any], event: list[Any] | None) -> str:
    """A dead letter's JSON line: `keys` (those of `DEAD_KEYS` it has that are not None) and the
    event's values (Python values: ints, floats, Decimals, datetimes, ...)."""
    doc: dict[str, Any] = {}
    for key in DEAD_KEYS:
        if keys.get(key) is not None:
            doc[key] = keys[key]
    if event is not None:
        doc["event"] = [json_value(v) for v in event]
    return json.dumps(doc, ensure_ascii=False, default=str)


def write_dead_letters(directory: Path | None, name: str, batch_id: int, lines: list[str]) -> None:
    """A batch's dead letters of failure point `name`: to stderr (no `directory`: the console), or
    one file per batch, replaced whole and at once (a replayed batch rewrites its own file)."""
    if not lines:
        return
    if directory is None:
        sys.stderr.write("\n".join(lines) + "\n")
        return
    file = f"dead-letter-{name}-{batch_id:08d}.jsonl".replace(":", "_")
    write_lines(directory / file, lines)


def write_lines(path: Path, lines: list[str]) -> None:
    """`lines` into `path`, whole or not at all: written beside it under a name of this process's
    (two attempts of one task may write at once), then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def dead_letter_dir(dead_letter: str | None, sinks: Iterable[str]) -> Path | None:
    """Where dead letters go: the given URI (None: the console), else beside the first file sink."""
    if dead_letter == "console":
        return None
    if dead_letter:
        return file_dir(dead_letter) or Path(dead_letter)
    first = next((d for u in sinks if (d := file_dir(u)) is not None), None)
    return (first.parent / "dead-letter") if first else Path("dead-letter")
