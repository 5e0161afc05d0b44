"""A trigger's stream on Spark: a Python data source whose offsets are its ticks.

- **The start** is recorded once per checkpoint (`<checkpoint>/inputs/<stream>.trigger`, written
  under a lock by whichever query asks first), so every query of a deployment, and every later run
  on its checkpoint, ticks on one schedule (operators.triggers).
- **An offset** is the number of ticks read and the time of the last one (`{"ticks": n, "at": ms}`).
  Spark keeps it with the checkpoint: a micro-batch replayed after a crash reads the same ticks, and
  a restart goes on after the last committed tick. It neither skips a tick that fell while the run
  was down nor repeats one: the ticks between are read then, at most MOST_PER_READ per micro-batch.
- **Now** is the clock of the run's settings (deployer.triggers.clock), handed over as an option:
  the machine's, or the controlled clock of `CEP_TRIGGER_CLOCK`.
- **With `--until-idle`** (availableNow) the run reads the ticks due when it started and ends, with
  the end-of-input row a file source ends with (deployer.spark.streams.file_source).
- A tick's row is what the local engine makes of it (deployer.triggers.ticks): the same record,
  converted by the same code.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow

from deployer.spark.streams.parsed_rows import (
    arrow_schema,
    end_batch,
    parsed_schema,
    records_batch,
    spool_option,
    spool_options,
    spooling,
)
from deployer.spark.streams.sources import reader_spool
from deployer.triggers.clock import Clock, parse
from deployer.triggers.ticks import MOST_PER_READ, Ticking, records
from operators import graph as g
from operators.triggers import Trigger

NAME = "cep_trigger"


def trigger_parsed(
    spark: SparkSession, node: g.Source, start_file: Path, clock: Clock, spool: Any = None
) -> DataFrame:
    """The rows of trigger `node` (parsed_rows.parsed_schema), ticking on `clock`; `spool`: the
    deployment's spool, whose `input-<stream>` label it has, its reader's tasks spool the stream's
    dead letters, as a file source's do (sources.reader_spool)."""
    assert node.trigger is not None
    spark.dataSource.register(TriggerDataSource)
    options = {
        "stream": node.stream,
        "start": str(start_file),
        "clock": clock.spec(),
        "trigger": base64.b64encode(pickle.dumps((node.trigger, node.schema))).decode("ascii"),
    }
    if spool is not None:
        options |= spool_options(reader_spool(node, spool, False))
    reader = spark.readStream.format(NAME)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _declared(options: Any) -> tuple[Trigger, Any]:
    trigger, schema = pickle.loads(base64.b64decode(options["trigger"]))
    assert isinstance(trigger, Trigger)
    return trigger, schema


def recorded_start(path: Path, clock: Clock) -> int:
    """The trigger's start: as recorded in `path`, or now recorded there from `clock`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read()
        if text.strip():
            start: int = json.loads(text)["start"]
            return start
        start = clock.start_ms()
        f.write(json.dumps({"start": start}))
        f.flush()
        os.fsync(f.fileno())
        return start


class TriggerDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> T.StructType:
        return parsed_schema(_declared(self.options)[1])

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return TriggerStreamReader(dict(self.options))


@dataclass
class _Ticks(InputPartition):
    """`count` ticks after the one at `after` (None: from the first), numbered from `first`; `end`
    adds the end-of-input row."""

    first: int
    after: int | None
    count: int
    end: bool = False


class TriggerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: dict[str, str]) -> None:
        self.options = opts
        self.trigger, self.schema = _declared(opts)
        self.clock = parse(opts.get("clock", ""))
        self.start = recorded_start(Path(opts["start"]), self.clock)
        self.until: int | None = None  # Trigger.AvailableNow: the clock when the query started
        self.spooled = spool_option(opts)

    def initialOffset(self) -> dict:
        return {"ticks": 0, "at": None}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.until = self.clock.now_ms()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        now = self.clock.now_ms() if self.until is None else self.until
        ticking = Ticking(self.trigger, self.start, start["at"], start["ticks"])
        ticks = ticking.due(now)
        if not ticks and (self.until is None or start.get("end")):
            return start  # nothing came due: no batch
        offset = {"ticks": ticking.done, "at": ticking.previous_ms}
        if self.until is None or len(ticks) == MOST_PER_READ:
            return offset  # watching, or more is due than one micro-batch reads
        return {**offset, "end": True}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        parts: list[InputPartition] = []
        if end["ticks"] > start["ticks"]:
            parts.append(_Ticks(start["ticks"], start["at"], end["ticks"] - start["ticks"]))
        if end.get("end") and end != start:
            parts.append(_Ticks(end["ticks"], None, 0, end=True))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Ticks)
        yield from spooling(self._read(partition), self.spooled)

    def _read(self, partition: _Ticks) -> Iterator[pa.RecordBatch]:
        arrow = arrow_schema(self.schema)
        if partition.count:
            # the same ticks whenever this partition is read: they follow from the offsets alone
            ticks = list(self.trigger.ticks(self.start, partition.after, 2**62, partition.count))
            rows = records(self.options["stream"], partition.first, ticks)
            yield records_batch(rows, partition.first, self.schema, arrow)
        if partition.end:
            yield end_batch(arrow)

    def commit(self, end: dict) -> None:
        pass
