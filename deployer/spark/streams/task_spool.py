"""What a task does to spool dead letters (deployer.spark.streams.spool): which micro-batch and
partition it runs, whether its query is the one that writes a failure point's dead letters, and the
file it writes them into. Used by the spooling stages the translation adds (spool.py) and by a file
source's reader, which spools its stream's rejected records as it reads them (file_source.py).
Standard library, pyarrow and the task's context only: a source's reader imports it."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext

from deployer.spark.streams.dead_letters import arrow_letters, write_lines

_BATCH_ID = "streaming.sql.batchId"  # the local property Spark's micro-batch execution sets
# The query a task runs for, as the deployment names it in its plan: a setting of the query's own
# session (deployer.spark.run.starting), which Spark hands its tasks as a local property.
QUERY = "spark.cep.query"
EVENT = "__event"  # a row's event, as its dead letter carries it
ORDER = "__seq"  # the rows' order key (deployer.spark.translate.graph SEQ)


def writes_for(owner: str | None) -> bool:
    """Whether the task running this writes the dead letters of a failure point `owner` writes:
    yes in that query's tasks, and outside any query of a deployment (a plan run by hand)."""
    ctx = TaskContext.get()
    query = ctx.getLocalProperty(QUERY) if ctx is not None else None
    return owner is None or query is None or query == owner


def task_of() -> tuple[str, int]:
    """The micro-batch and partition of the task that runs this (outside a task: "none", 0)."""
    ctx = TaskContext.get()
    batch_id = (ctx.getLocalProperty(_BATCH_ID) if ctx is not None else None) or "none"
    return batch_id, ctx.partitionId() if ctx is not None else 0


def spool_failed(
    folder: Path,
    batch: pa.RecordBatch,
    failed: pa.Array,
    err: str,
    fixed: dict[str, Any],
    part: int,
    k: int,
    per_row: Sequence[str] = (),
) -> None:
    """The dead letters of `batch`'s `failed` rows (their reason in `err`, their event in `EVENT`;
    `fixed` fields, and those of `per_row` taken from the row's own columns: a source's rejected
    records) into the spool's `folder` of a micro-batch, from task `part`'s Arrow batch `k`."""
    lines = arrow_letters(batch.filter(failed), err, EVENT, fixed, per_row)
    # One task's lines, whole or not at all: a task attempt run again rewrites its file.
    write_lines(folder / file_name(batch, failed, lines, part, k), lines)


def file_name(batch: pa.RecordBatch, failed: pa.Array, lines: list[str], part: int, k: int) -> str:
    """The spool file of one Arrow batch's dead letters: named by their rows' order keys and lines,
    when the rows have order keys, so that the same failures make the same file wherever a task
    finds them. A query whose plan computes a failure point twice (a stream read by two branches of
    one Union: Spark reuses no stateful subtree) spools its dead letters twice, from tasks of
    different partition numbers, and must write them once (found by the fuzzer, seed 8203: a
    pattern's failed condition dead-lettered twice on Spark). The first order key leads the name,
    so that the gathered lines keep the rows' order; without order keys, the task's partition."""
    if ORDER not in batch.schema.names:
        return f"part-{part:05d}-{k:05d}.jsonl"
    keys = [str(v) for v in batch.column(ORDER).filter(failed).to_pylist()]
    digest = hashlib.sha256("\n".join([*keys, *lines]).encode()).hexdigest()[:24]
    # the key as hex (its text may hold any character), which sorts as the text does, cut short
    return f"part-{keys[0].encode()[:60].hex()}-{digest}.jsonl"


@dataclass(frozen=True)
class InStage:
    """A failure point whose failed rows the Python stage that finds them spools itself (a data store
    call's: deployer.spark.datastores.sql), where `SparkGraph.split_errors` adds a stage of its own
    after it (spool.py `_spooler`), a Python worker per task more in every micro-batch. The same
    rows make the same dead letters in the same files (named by their order keys: `file_name`), so
    a checkpoint of either layout resumes with the other."""

    directory: str  # the failure point's spool directory
    owner: str | None  # the query that writes its dead letters (`writes_for`)
    err: str  # the column of the reason, NULL in the rows that did not fail
    event: tuple[str, ...]  # the failed event's columns, as its dead letter's `_0`, `_1`, ...
    fixed: dict[str, Any]  # stage, stream, node, line

    def splitter(self) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
        """In a task: each Arrow batch's rows that did not fail, without `err`, the others spooled."""
        batch_id, part = task_of()
        writes = writes_for(self.owner)
        numbers = itertools.count()
        names = [f"_{i}" for i in range(len(self.event))]

        def split(batch: pa.RecordBatch) -> pa.RecordBatch:
            k = next(numbers)
            failed = pc.is_valid(batch.column(self.err))
            if pc.any(failed).as_py():
                if writes:
                    event = pa.StructArray.from_arrays([batch.column(c) for c in self.event], names=names)
                    whole = batch.append_column(EVENT, event)
                    spool_failed(
                        Path(self.directory) / batch_id, whole, failed, self.err, self.fixed, part, k
                    )
                batch = batch.filter(pc.invert(failed))
            return batch.drop_columns([self.err])

        return split
