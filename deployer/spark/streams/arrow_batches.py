"""Arrow batch helpers shared by the Python operators on Spark (`mapInArrow`) and the writers."""

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
    that a few packed rows per batch do not pay (see deployer.spark.windows.tuple_buckets)."""
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


def in_order(data: pa.Table, order: tuple[str, ...]) -> pa.Table:
    """`data` sorted by the `order` columns (stably), which are dropped: a copy only when needed."""
    if order and data.num_rows > 1:
        n = data.num_rows - 1
        before = [data.column(c).slice(0, n) for c in order]
        after = [data.column(c).slice(1) for c in order]
        # out of order: some row sorts before the one ahead of it (on the first column that differs)
        back = pc.less(after[-1], before[-1])
        for a, b in zip(reversed(after[:-1]), reversed(before[:-1]), strict=True):
            back = pc.or_(pc.less(a, b), pc.and_(pc.equal(a, b), back))
        # NULLs first, as Spark's ascending sort puts them (a comparison with NULL finds nothing)
        if pc.any(back).as_py() or any(data.column(c).null_count for c in order):
            keys = [(c, "ascending") for c in order]
            data = data.take(pc.sort_indices(data, keys, null_placement="at_start"))
    return data.drop_columns(list(order))
