"""Arrow batch helpers shared by the Python operators on Spark (`mapInArrow`)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def coalesced(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The batches, concatenated into batches of at least `rows` rows (the last may have fewer).

    Spark hands `mapInArrow` batches of `spark.sql.execution.arrow.maxRecordsPerBatch` rows (10,000
    by default); an operator with a fixed cost per batch may prefer larger ones. For a ReadSQL each
    query has a fixed cost in the worker and on the server (Postgres hashes the lookup table once
    per query when it joins many keys). The batches of a task are its partition of a micro-batch,
    already there: waiting for the next one adds no latency."""
    pending: list[pa.RecordBatch] = []
    n = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        n += batch.num_rows
        if n >= rows:
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, n = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def packed(batch: pa.RecordBatch, key: str) -> pa.RecordBatch:
    """One row per distinct value of the integer column `key`: the value, and the rows that have
    it (without `key`) as one Arrow IPC stream in the binary column `__events`.

    What lets a stateful Python operator take many rows per row of its input: PySpark's
    transformWithStateInPandas turns its input into Python objects row by row, a cost per row
    that a few packed rows per batch do not pay (see deployer.spark.tuple_buckets)."""
    keys = batch.column(key)
    order = pc.sort_indices(keys)
    rows = batch.take(order)
    sorted_keys = rows.column(key).to_numpy()
    starts = [0, *(np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1).tolist()]
    ends = [*starts[1:], rows.num_rows]
    events = rows.drop_columns([key])
    blobs = []
    for start, end in zip(starts, ends, strict=True):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, events.schema) as writer:
            writer.write_batch(events.slice(start, end - start))
        blobs.append(sink.getvalue().to_pybytes())
    return pa.RecordBatch.from_arrays(
        [pa.array(sorted_keys[starts], type=keys.type), pa.array(blobs, type=pa.binary())],
        names=[key, "__events"],
    )


def unpacked(blobs: list[bytes]) -> pa.Table:
    """The rows of `packed` blobs, as one table."""
    return pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in blobs]).combine_chunks()
