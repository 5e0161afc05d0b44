"""Dead letters on Spark: every record or event that cannot be processed, with the reason, as JSON lines.

One shape for every dead letter (`dead_letter_frame`), so that the dead letters of different
operators (different event types) share one DataFrame schema and one query; written with the same
keys and values as the local engine's (deployer.local.driver).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.connectors.files import file_dir
from deployer.connectors.records import json_value
from deployer.spark.streams.sinks import Counter
from deployer.spark.translate.columns import encoded_event
from stores.arrow import micros_value

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


def dead_letter_writer(
    directory: Path | None,
    name: str,
    fixed: dict[str, Any] | None = None,
    counted: Counter | None = None,
) -> Any:
    """foreachBatch for rejected records and failed events; the same JSON as the local engine's.

    A batch is a `dead_letter_frame`, or any DataFrame of `reason` and `event` (a struct of the
    event's values) and the other keys, which is made one with `fixed`. `counted` is told how many
    were written, late events aside (the run counts those apart: deployer.spark.streams.sources)."""

    def write(df: DataFrame, batch_id: int) -> None:
        if df.columns != [*DEAD_KEYS, "event"] or isinstance(df.schema["event"].dataType, T.StructType):
            df = dead_letter_frame(df, fixed or {})
        # One Spark job for the whole batch (toLocalIterator runs one per partition, and a union of
        # many operators' dead letters has many), Arrow's columns as Python values.
        rows = df.toArrow().to_pylist()
        late = sum(row["stage"] == "late" for row in rows)
        lines = [dead_letter_line(row) for row in rows]
        if counted is not None:
            counted(len(lines) - late)
        write_dead_letters(directory, name, batch_id, lines)

    return write


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
