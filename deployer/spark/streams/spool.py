"""Dead letters written by the tasks that find them, from the micro-batch that computes their rows.

A failure point after a window, a join or a data store call used to be a streaming query of its own
(`failed:<node>`), which computed the window, or called the store, a second time for every event
to find the few that fail. Where one query computes the failure point's rows (deployer.spark.run.
queries decides), that query now writes its dead letters as well: the translation
(`SparkGraph.split_errors`) puts a `mapInArrow` at the split, which passes the rows that did not
fail on and writes the failed ones, as dead-letter lines, into a spool directory, one file per
task and Arrow batch:

    <checkpoint>/spool/<failure point>/<batch id>/part-<first order key>-<digest>.jsonl

(named by what it holds: deployer.spark.streams.task_spool.file_name)

The batch id is the task's `streaming.sql.batchId` local property, which Spark sets on every job of
a micro-batch. The query's spool directories are emptied as it starts (`Spool.clear`), and its
foreachBatch, in the driver, gathers a batch's files in order once its writer has run the batch
and writes them where every dead letter goes (`dead_letters.write_dead_letters`: a file per failure point and batch, replaced
whole, or the console), counting them. A batch that fails or is cut short anywhere on the way is not
committed, and its replay does all of it again: exactly once, as the query of its own was. Every
writer computes its batch (a replay a sink finds already written included: their stateful
operators must commit), so no batch's dead letters are skipped.

The spool lives beside the checkpoint, which Spark's tasks write to as well (their state stores).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T

from deployer.spark.streams.dead_letters import write_dead_letters
from deployer.spark.streams.sequencer import LATE, LATE_N, LATE_TS
from deployer.spark.streams.task_spool import EVENT, ORDER, InStage, spool_failed, task_of, writes_for

if TYPE_CHECKING:  # not at run time: a task that spools imports this module, and no sink
    from deployer.spark.streams.sinks import Writer


class Spool:
    """Where the failure points of `by_query` (query name -> its labels, `failed:<label>` once:
    `n6`, `n6-2`; one query spools each) spool their dead letters; the translation's hook
    (`SparkGraph.spool`) and the driver's gatherer. Other queries may pass the same spooling stage
    (the queries of a deployment share the frames of its sources and operators); their tasks see
    from `QUERY` that they run for another query, and write nothing (task_spool.writes_for)."""

    def __init__(self, root: Path, by_query: Mapping[str, Collection[str]]):
        self.root = root
        self.by_query = {name: sorted(labels) for name, labels in by_query.items()}
        self.owner = {label: name for name, labels in by_query.items() for label in labels}
        self.labels = frozenset(self.owner)

    def __call__(
        self,
        label: str,
        df: DataFrame,
        err: str,
        payload: Column,
        fixed: dict[str, Any],
    ) -> DataFrame:
        """The rows of `df` whose column `err` is NULL, without it; the others, as dead letters of
        `payload` (the failed event: a struct of its values, or already encoded) with the reason in
        `err` and `fixed` (stage, node, line), are written into the spool by the task.

        The task builds each dead letter from the failed row's values (`arrow_letters`), as the driver
        builds the others from a `dead_letter_frame` (the same values: both go through Python's
        values of the same Arrow columns); building those columns here cost about a hundred round
        trips to the JVM per failure point, and three plans more, at every deployment's start."""
        schema = df.schema  # once: each look at it is a round trip to the JVM
        fields = [f for f in schema.fields if f.name != err]
        where = (str(self.root / label), self.owner.get(label))
        # the fields keep their metadata: the event-time column's tells Spark where the watermark is
        return df.withColumn(EVENT, payload).mapInArrow(
            _spooler(where, err, [f.name for f in fields], fixed),
            T.StructType(fields),
        )

    def in_stage(self, label: str, err: str, event: tuple[str, ...], fixed: dict[str, Any]) -> InStage:
        """What a Python stage that finds the failures of `label` needs to spool them itself
        (`InStage`): written and gathered as those `__call__` spools, with nothing after it."""
        return InStage(str(self.root / label), self.owner.get(label), err, event, fixed)

    def late(
        self, label: str, rows: DataFrame, released: T.StructType, ts: str, fixed: dict[str, Any]
    ) -> DataFrame:
        """The events a stream's Sequencer releases, from its own rows (`rows`:
        sequencer.sequencer_rows): `released`'s columns, of which `ts` is the event time, and its
        late events written into the spool under `label` with `fixed` (stage, stream, node, line),
        as `__call__` writes them. Unpacked and spooled in one Python stage where `unpack` and
        `__call__` took two, each a Python worker per task that the micro-batch waits for in turn.

        A task that found late events adds a row with their number in `LATE_N`; it is NULL in the
        events' rows, and the caller counts the late events from it and drops that row. The
        events' columns are all nullable here (that row has NULL in each)."""
        fields = [T.StructField(f.name, f.dataType, True, f.metadata) for f in released.fields]
        return rows.mapInArrow(
            _late_spooler((str(self.root / label), self.owner.get(label)), released.names, ts, fixed),
            T.StructType([*fields, T.StructField(LATE_N, T.LongType())]),
        )

    def writer(
        self, write: Writer, query: str, directory: Path | None, counted: Callable[[int], None]
    ) -> Writer:
        """`write`, a query's foreachBatch, made to write the dead letters its tasks spool (into
        `directory`, None: the console), telling `counted` how many (late events aside, as
        `dead_letters.DeadLetterWriter` does); `write` itself for a query that spools none."""
        labels = self.by_query.get(query, [])
        if not labels:
            return write

        def run(df: DataFrame, batch_id: int) -> None:
            write(df, batch_id)
            for label in labels:
                lines = self._gathered(label, batch_id)
                if not label.startswith("late-"):  # late events are counted apart (sources._marked)
                    counted(len(lines))
                write_dead_letters(directory, label, batch_id, lines)
                shutil.rmtree(self._batch_dir(label, batch_id), ignore_errors=True)

        return run

    def clear(self, query: str) -> None:
        """Remove what an earlier start of `query` left of the dead letters it spools (it stopped before
        gathering a batch, which the new start replays whole): called as the query starts, as one
        query spools each label. Not as each batch begins: Spark may run a micro-batch's first
        stages, spooling included, before it calls the foreachBatch (the UpdateSQL query's shuffle
        did, and its rejected records were lost: fuzzer seed 99004). Within one start of a query a
        batch is tried once, and a task tried again rewrites its own file."""
        for label in self.by_query.get(query, []):
            shutil.rmtree(self.root / label, ignore_errors=True)

    def _batch_dir(self, label: str, batch_id: int) -> Path:
        return self.root / label / str(batch_id)

    def _gathered(self, label: str, batch_id: int) -> list[str]:
        """The lines the tasks spooled for `batch_id`, by partition and Arrow batch."""
        folder = self._batch_dir(label, batch_id)
        if not folder.is_dir():
            return []
        lines: list[str] = []
        for part in sorted(folder.glob("part-*.jsonl")):
            lines += part.read_text(encoding="utf-8").splitlines()
        return lines


def _spooler(
    where: tuple[str, str | None],
    err: str,
    names: list[str],
    fixed: dict[str, Any],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`Spool.__call__`'s function; `where`: the failure point's directory and the query that
    writes it."""
    directory, owner = where

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batch_id, part = task_of()
        writes = writes_for(owner)
        for k, batch in enumerate(batches):
            failed = pc.is_valid(batch.column(err))
            if pc.any(failed).as_py():
                if writes:
                    spool_failed(Path(directory) / batch_id, batch, failed, err, fixed, part, k)
                batch = batch.filter(pc.invert(failed))
            yield batch.select(names)

    return run


def _late_spooler(
    where: tuple[str, str | None], released: list[str], ts: str, fixed: dict[str, Any]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`Spool.late`'s function: each packed row's events (sequencer.unpack), the late ones spooled
    as `__call__`'s are (their event, its event time from `LATE_TS`: sources._late_event) by the
    tasks of the query that writes them (`where`: the directory and that query), the others passed
    on, and a count row after a blob that had late ones (in every query: a run counts the late
    events of a stream as the most any query did, deployer.spark.run.progress)."""
    values = [n for n in released if n != ORDER]
    directory, owner = where

    def unpack_and_spool(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batch_id, part = task_of()
        writes = writes_for(owner)
        k = 0
        for packed_rows in batches:
            for blob in packed_rows.column("__events").to_pylist():
                table = pa.ipc.open_stream(blob).read_all().combine_chunks()
                for batch in table.to_batches():
                    late = pc.is_valid(batch.column(LATE))
                    n = int(pc.sum(late.cast(pa.int64())).as_py() or 0)
                    events = batch.select(released)
                    if n and writes:
                        given = [batch.column(LATE_TS if v == ts else v) for v in values]
                        event = pa.StructArray.from_arrays(given, names=values)
                        spool_failed(
                            Path(directory) / batch_id,
                            batch.append_column(EVENT, event),
                            late,
                            LATE,
                            fixed,
                            part,
                            k,
                        )
                    if n:
                        events = events.filter(pc.invert(late))
                    yield events.append_column(LATE_N, pa.nulls(events.num_rows, pa.int64()))
                    if n:
                        counted = [pa.nulls(1, f.type) for f in events.schema]
                        yield pa.RecordBatch.from_arrays(
                            [*counted, pa.array([n], pa.int64())], [*released, LATE_N]
                        )
                    k += 1

    return unpack_and_spool  # its name shows in the query plan
