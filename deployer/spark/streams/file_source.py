"""`file:DIR` sources on Spark: a Python data source that reads files in the order they arrive, by name
among those that arrive together, as the local engine does.

Why not Spark's own file source: it takes the files of a directory in modification-time order (and in
no defined order among files with equal times), so a run could read `f2` before `f1`; with event
time, `f1`'s events then came after `f2`'s and could be late on one run and not on the next (a
two-stream join lost pairs that way). Here:

- Every source keeps an **arrival log** (`<checkpoint>/inputs/<stream>.files`): the names of its
  files in the order they were first seen, appended (under a lock) by whichever query lists the
  directory first; names that appear together are appended in name order. Every query of the run,
  and every later run on the same checkpoint, reads the files in this order, so a micro-batch
  replayed after a crash holds the same files, and all queries see one arrival order.
- An offset is the number of log entries read (`{"files": n}`); a micro-batch reads entries
  [start, end), at most `maxFilesPerTrigger` of them, split into partitions of consecutive files.
- A record's `__seq` is its file's place in the log and its line: it sorts in arrival order.
- Records are read and converted by the connectors (`deployer.connectors.files.read_file`,
  `records.converted`): JSON lines, JSON arrays and CSV, the same records accepted and rejected with
  the same reasons as on the local engine.
- With `--until-idle` (availableNow) the run ends when the files there at its start are read: the
  last micro-batch carries an **end-of-input row** (`__end` set, nothing else), which tells the
  event-time stage (deployer.spark.streams.sequencer) that the stream is over, so that it releases the
  events it was holding, as the local engine does at the end of its input. The end offset says it
  (`{"files": n, "end": true}`), so a source with nothing to read still ends; a later run on the
  same checkpoint goes on from there if new files arrived.
- A stream alone with WATERMARK 0, or with a delay and only TIME windows after it
  (deployer.spark.run.held), (`options`' `sequenced`) has its late events marked here, as its
  Sequencer would mark them (deployer.spark.streams.lateness), and passes no Sequencer: such a
  stream holds no event back, and its one state, its largest event time so far, is in its offsets
  (`{"files": n, "latest": µs}`: the driver reads a micro-batch's files for it when it plans the
  batch, so that the batch's tasks start from the one before, and a replayed batch from the same).
  Its micro-batch is split into partitions of consecutive files as any other's, each starting from
  the largest event time before its first file, which the driver noted as it read them
  (`_after`), or, for a batch replayed after a restart, reads again. It has no end-of-input row
  (nothing is held to be released at the end).
- The streams of a merge whose order shows nowhere (deployer.spark.run.held) are marked so too, and
  the merge's watermark is then Spark's, the least of its streams' (docs/language.md, "Merges").
  Spark keeps a stream's own watermark only in memory: a query started again counts a stream that
  brings no event as 0, and its largest event time as that of its new events only, so a stream
  silent since the last run would hold the merge back. So the first micro-batch of each reader (a
  query's start: `run`) carries a **placeholder row** at the stream's largest event time so far
  (`mark` in its offset; SEQ `PLACEHOLDER`, dropped right after Spark's watermark,
  deployer.spark.streams.sources). A stream that has had no event ends a `--until-idle` run with one
  at `PLACED`, beyond any event, once another stream of the merge has had one (each notes that it
  has, beside its arrival log: `had_events_path`): the language's merge does not wait for a stream
  that ended without an event, and the other stream's own watermark, in the same query, keeps
  Spark's (the least of them) from going beyond what that stream's events allow. So does a stream
  that only shares its queries with other streams with event time (deployer.spark.run.coupled: a
  Union of two TIME windows' rows, say), once one of them has had an event or is one that places no
  such row (`besideunmarked`: a stream of a merge its Sequencers hold, or not from files, whose
  watermark stays at 0 without events). A stream a Sequencer of its own holds (`heldts`: the
  position of its event time) sends the row as its end-of-input row, which Spark's watermark,
  declared before the Sequencer, counts and the Sequencer takes as the end; its reader notes that
  it had an event by reading the files of each planned batch until it finds one.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import pickle
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from deployer.connectors.files import list_files, read_file
from deployer.spark.streams.lateness import NONE, latest_after, marked
from deployer.spark.streams.parsed_rows import (
    REASON,
    arrow_schema,
    end_batch,
    parsed_schema,
    placeholder_batch,
    records_batch,
    spool_option,
    spool_options,
    spooling,
)
from deployer.spark.translate.columns import col_name
from operators.datatypes import Schema

NAME = "cep_files"
FILES_PER_PARTITION = 16  # consecutive files one task reads, when a micro-batch has many
# A merged stream's placeholder time once it ended without an event (µs: 9999-12-31, Spark's last day)
PLACED = 253_402_214_400_000_000


class ArrivalLog:
    """The names of a directory's files in the order they arrived (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def admit(self, directory: Path) -> list[str]:
        """The log, after appending the files of `directory` it does not hold yet."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            names = f.read().splitlines()
            seen = set(names)
            new = [p.name for p in list_files(directory) if p.name not in seen]
            if new:
                f.write("".join(n + "\n" for n in new))
                f.flush()
                os.fsync(f.fileno())
            return names + new

    def names(self) -> list[str]:
        try:
            return self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []


def options(
    directory: Path,
    shown: str,
    log: Path,
    schema: Schema,
    max_files: int | None,
    sequenced: tuple[int, str, int] | None = None,
    spooled: dict[str, Any] | None = None,
    merged: Sequence[Path] | None = None,
    unmarked: bool = False,
    held_ts: int | None = None,
) -> dict[str, str]:
    """The data source's options (strings, as Spark passes them). `sequenced`: the position of the
    stream's event-time field, its name and its WATERMARK in microseconds, for a stream whose late
    events are marked here; `merged`: for such a stream in a merge, the arrival logs of the other
    streams of the merge (the module docstring), or of its partners in the queries that read it
    (deployer.spark.run.coupled), `unmarked` when one of them is a stream that places no such row;
    `held_ts`: for a stream of `merged` that a Sequencer holds, the position of its event time;
    `spooled`: what its reader needs to spool its rejected records (parsed_rows.spool_rejects)."""
    opts = {
        "path": str(directory.resolve()),
        "shown": shown,
        "log": str(log),
        "schema": base64.b64encode(pickle.dumps(schema)).decode("ascii"),
    }
    if max_files:
        opts["maxfilespertrigger"] = str(max_files)  # Spark hands options over lower-cased
    if sequenced is not None:
        opts["sequenced"] = json.dumps({"ts": sequenced[0], "stream": sequenced[1], "delay": sequenced[2]})
    if merged is not None:
        opts["merged"] = json.dumps([str(had_events_path(other)) for other in merged])
    if merged is not None and sequenced is None and held_ts is not None:
        opts["heldts"] = str(held_ts)  # a stream its Sequencer holds: its end row may be placed
    if unmarked:
        opts["besideunmarked"] = "true"
    return opts | spool_options(spooled)


class FileStreamDataSource(DataSource):
    """A directory of event files, in arrival order; options as written by `options`."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> T.StructType:
        sequenced = _sequenced(self.options)
        return parsed_schema(_schema(self.options), None if sequenced is None else sequenced[0])

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return FileStreamReader(dict(self.options))


def _schema(options: Any) -> Schema:
    schema = pickle.loads(base64.b64decode(options["schema"]))
    assert isinstance(schema, Schema)
    return schema


def _sequenced(options: Any) -> tuple[int, str, int] | None:
    """`options`' `sequenced`: (the event time's position, the stream, its WATERMARK in µs), or None."""
    if "sequenced" not in options:
        return None
    given = json.loads(options["sequenced"])
    return int(given["ts"]), str(given["stream"]), int(given.get("delay", 0))


def had_events_path(log: Path) -> Path:
    """The file whose being there says that a merged stream has had an event, beside its arrival
    `log`: written by the stream's readers, read by those of the other streams of its merge."""
    return log.with_suffix(".had-events")


@dataclass
class _Files(InputPartition):
    """Consecutive files of the log: their names and the log position of the first; `end` adds the
    end-of-input row after them."""

    first: int
    names: list[str]
    end: bool = False
    latest: int = NONE  # a sequenced stream's largest event time before them
    mark: int | None = None  # a merged stream's placeholder row's event time, after them


class FileStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: dict[str, str]) -> None:
        self.options = opts
        self.directory = Path(opts["path"])
        self.log = ArrivalLog(Path(opts["log"]))
        self.max_files = int(opts["maxfilespertrigger"]) if "maxfilespertrigger" in opts else None
        self.target: int | None = None  # Trigger.AvailableNow: the files there when the query started
        self.sequenced = _sequenced(opts)
        self.spooled = spool_option(opts)
        self._made: tuple[Schema, pa.Schema] | None = None  # `_schemas`
        # A sequenced stream's largest event time after each file of the log up to a planned batch's
        # end, by position: noted by `_with_latest`, read by `partitions`, dropped by `commit`.
        self._after: dict[int, int] = {}
        # A merged stream's: the others' `had_events_path`s, and this reader's run (module docstring)
        self.merged = [Path(p) for p in json.loads(opts["merged"])] if "merged" in opts else None
        self.beside_unmarked = opts.get("besideunmarked") == "true"
        self.held_ts = int(opts["heldts"]) if "heldts" in opts else None
        self.held_column = col_name(self.held_ts or 0)  # its event time's column, when held_ts
        self.run = uuid.uuid4().hex
        self._noted = False  # `had_events_path` written by this reader

    def initialOffset(self) -> dict:
        return {"files": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = len(self.log.admit(self.directory))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return self._with_mark(start, self._next(start, limit))

    def _next(self, start: dict, limit: ReadLimit) -> dict:
        if start.get("end") and (self.target is None or self.target <= start["files"]):
            return start  # ended, and nothing arrived since: no batch
        known = len(self.log.admit(self.directory)) if self.target is None else self.target
        end = known
        if isinstance(limit, ReadMaxFiles):
            end = min(known, start["files"] + limit.max_files)
        if self.target is not None and end >= self.target:
            return self._with_latest(start, {"files": self.target, "end": True})
        if end <= start["files"]:
            return start  # nothing new: no batch
        return self._with_latest(start, {"files": end})

    def _with_mark(self, start: dict, end: dict) -> dict:
        """For a merged stream, `end` with this reader's run and the event time of the placeholder
        row that its batch or an earlier one of the run carries (`mark`): the stream's largest event
        time so far in the run's first, `PLACED` once it ended without an event while another stream
        of the merge has had one (the module docstring)."""
        if self.merged is None:
            return end
        if self.held_ts is not None:
            return self._held_end(start, end)
        mine = start.get("run") == self.run
        mark = start.get("mark") if mine else end.get("latest")
        if mark is None and self._ended_without_events(end):
            mark = PLACED
        out = {k: v for k, v in end.items() if k not in ("run", "mark")} | {"run": self.run}
        out |= {} if mark is None else {"mark": mark}
        return start if out == start else out

    def _held_end(self, start: dict, end: dict) -> dict:
        """For a stream a Sequencer holds, which sees its rows after Spark's watermark: notes that it
        has had an event (read in the files it has not read for that yet), and puts its end-of-input
        row at `PLACED` (`mark`) when it ended without any, as a stream its source marks does."""
        noted = had_events_path(self.log.path)
        if not noted.is_file():
            for position, name in enumerate(self.log.names()[start["files"] : end["files"]], start["files"]):
                if latest_after(self._rows(position, name), self.held_column, REASON, NONE) != NONE:
                    noted.touch()
                    break
        placed = end.get("end") and "mark" not in end and self._ended_without_events(end)
        return {**end, "mark": PLACED} if placed else end

    def _ended_without_events(self, end: dict) -> bool:
        assert self.merged is not None
        ended = self.target is not None and end["files"] >= self.target and end.get("latest") is None
        ended &= self.held_ts is None or not had_events_path(self.log.path).is_file()
        # a stream no file source marks stays at 0 without events: it still holds the query back
        return ended and (self.beside_unmarked or any(other.is_file() for other in self.merged))

    def _with_latest(self, start: dict, end: dict) -> dict:
        """`end`, for a sequenced stream with its largest event time after the files up to it."""
        if self.sequenced is None:
            return end
        latest = self._latest(start)
        for position, name in enumerate(self.log.names()[start["files"] : end["files"]], start["files"]):
            latest = self._after[position] = self._latest_after(position, name, latest)
        if latest != NONE and not self._noted:  # for the streams it is a partner of, merged or not
            had_events_path(self.log.path).touch()  # once per reader, not at every batch's planning
            self._noted = True
        return {**end, "latest": None if latest == NONE else latest}

    def _latest(self, offset: dict) -> int:
        """A sequenced stream's largest event time before `offset`'s files; an offset without it
        (none is written so, but cheap to be sure of) by reading its files again."""
        if "latest" in offset:
            return NONE if offset["latest"] is None else int(offset["latest"])
        latest = self._with_latest({"files": 0, "latest": None}, {"files": offset["files"]}).get("latest")
        return NONE if latest is None else int(latest)

    def _latests_before(self, start: dict, names: list[str], firsts: range) -> list[int]:
        """A sequenced stream's largest event time before each of the files at `firsts` of a
        micro-batch's `names` (from `start`): as `_with_latest` noted it when it planned the batch,
        or (a batch replayed after a restart, whose offsets were not planned by this reader) by
        reading the batch's files up to its last partition's again."""
        first, latest = start["files"], self._latest(start)
        out = []
        for i in firsts:
            if i and first + i - 1 in self._after:
                latest = self._after[first + i - 1]
            elif i:
                for k in range(i - FILES_PER_PARTITION, i):
                    latest = self._latest_after(first + k, names[k], latest)
            out.append(latest)
        return out

    def _latest_after(self, position: int, name: str, latest: int) -> int:
        """A sequenced stream's largest event time after the file at `position`, `latest` before it."""
        assert self.sequenced is not None
        return latest_after(self._rows(position, name), col_name(self.sequenced[0]), REASON, latest)

    def reportLatestOffset(self) -> dict | None:
        return {"files": len(self.log.names())}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        names = self.log.names()[start["files"] : end["files"]]
        firsts = range(0, len(names), FILES_PER_PARTITION)
        if self.sequenced is not None:  # each from the largest event time before its first file
            latests = self._latests_before(start, names, firsts)
            files = [
                _Files(start["files"] + i, names[i : i + FILES_PER_PARTITION], latest=latest)
                for i, latest in zip(firsts, latests, strict=True)
            ]
            placed = "mark" in end and (start.get("run"), start.get("mark")) != (end["run"], end["mark"])
            return [*files, _Files(end["files"], [], mark=int(end["mark"]))] if placed else files
        parts = [_Files(start["files"] + i, names[i : i + FILES_PER_PARTITION]) for i in firsts]
        if end.get("end") and end != start:
            parts.append(_Files(end["files"], [], end=True, mark=end.get("mark")))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Files)
        yield from spooling(
            self._marked(partition) if self.sequenced is not None else self._read(partition), self.spooled
        )

    def _read(self, partition: _Files) -> Iterator[pa.RecordBatch]:
        for k, name in enumerate(partition.names):
            yield self._rows(partition.first + k, name)
        if partition.end and partition.mark is not None:  # its Sequencer takes it as the end row
            yield placeholder_batch(self._schemas()[1], self.held_column, partition.mark)
        elif partition.end:
            yield end_batch(self._schemas()[1])

    def _marked(self, partition: _Files) -> Iterator[pa.RecordBatch]:
        """A sequenced stream's files, their late events marked (deployer.spark.streams.lateness)."""
        assert self.sequenced is not None
        ts, stream, delay = col_name(self.sequenced[0]), self.sequenced[1], self.sequenced[2]
        latest = partition.latest
        for k, name in enumerate(partition.names):
            rows, latest = marked(self._rows(partition.first + k, name), ts, REASON, latest, stream, delay)
            yield rows
        if partition.mark is not None:  # an event of no one's: never late
            yield marked(placeholder_batch(self._schemas()[1], ts, partition.mark), ts, REASON, NONE, stream)[
                0
            ]

    def _rows(self, position: int, name: str) -> pa.RecordBatch:
        """The rows of the file at `position` of the log, named `name`."""
        schema, arrow = self._schemas()
        shown = Path(self.options["shown"]) / name
        return records_batch(read_file(self.directory / name, shown), position, schema, arrow)

    def _schemas(self) -> tuple[Schema, pa.Schema]:
        """The stream's schema and its rows' Arrow schema (`arrow_schema`), made once per reader."""
        if self._made is None:
            schema = _schema(self.options)
            self._made = (schema, arrow_schema(schema))
        return self._made

    def commit(self, end: dict) -> None:
        # The files are not ours to move or delete; what the driver noted of them is no longer needed.
        self._after = {p: latest for p, latest in self._after.items() if p >= end["files"]}
