"""TUPLE windows over numbers on Spark: many groups per Python call, vectorised across groups.

`deployer.spark.windows.window_state` keeps one state per group and so makes one Python call per group and
micro-batch; PySpark's per-group machinery (a pandas frame in, a state read and write over the
socket to the JVM, a frame out) costs about a millisecond and a half per call, whatever the group's
size. Here the groups are spread over `BUCKETS` buckets by a hash of their key, and the state is
per bucket: one read and one write per bucket and micro-batch hold the open windows of all its
groups, and the windows of all its groups are found and aggregated with numpy at once.

PySpark's transformWithStateInPandas also turns every input row into a Python object before it
groups them (a loop per event in the worker, most of its time). So the events reach it packed: a
`mapInArrow` before the shuffle turns each Arrow batch into one row per bucket, holding the
bucket's events as an Arrow IPC stream (`deployer.spark.streams.arrow_batches.packed`), and the processor unpacks
them into Arrow columns, exact (integers with NULLs stay integers).

Taken when every aggregated value is a number (integers, floats, and timestamps as epoch
microseconds); the others (decimals, strings, booleans) and BATCH windows stay per group. The
windows, results and order keys are those of `window_state.WindowProcessor` (whose module docstring
says how they follow the reference executor).

State of a bucket, one value of two Arrow IPC streams: `groups`, a table of its groups' keys
(`__group`), for each the events still to skip (ADVANCE > SIZE) and the number of buffered events;
`events`, the buffered events of all its groups, group after group (NULLs kept as nulls). A state
of typed arrays, one element per event, crosses the state server as Python objects, element by
element, both ways; two opaque blobs cross as two values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from deployer.spark.streams.arrow_batches import coalesced, packed, unpacked
from deployer.spark.windows.aggregate_rows import AGG_ERR
from deployer.spark.windows.reduce import AggSpec, reduce_windows
from deployer.spark.windows.state_layout import BUCKETS
from deployer.spark.windows.window_limit import FIELD as LIMIT_FIELD
from deployer.spark.windows.window_limit import WindowLimit

if TYPE_CHECKING:
    import pandas as pd

# Events per packing step (deployer.spark.streams.arrow_batches.coalesced): fewer, larger blobs per bucket.
PACK_ROWS = 100_000


@dataclass
class _Merged:
    """A bucket's events for one step: its groups (sorted), every event's group, old then new
    (`elem_group`), each group's events still to skip, the events' order keys and value columns
    (values, not NULL), and where the new events came from in the batch."""

    groups: np.ndarray
    elem_group: np.ndarray
    skip: np.ndarray
    seq: np.ndarray
    columns: dict[str, tuple[np.ndarray, np.ndarray]]
    order: np.ndarray  # the new events' positions in the batch, group after group
    first_new: np.ndarray
    groups_new: np.ndarray


class BucketedTuple(StatefulProcessor):
    """State per bucket of groups; see the module docstring."""

    def __init__(
        self,
        size: int,
        advance: int,
        aggs: list[AggSpec],
        buf_schema: T.StructType,
        out_columns: list[str],
        input_columns: list[str],
        limit: WindowLimit | None = None,
    ):
        self.size = size
        self.advance = advance
        self.aggs = aggs
        self.value_columns = [f.name for f in buf_schema.fields if f.name != "__seq"]
        self.integral = {
            f.name: not isinstance(f.dataType, T.DoubleType | T.FloatType) for f in buf_schema.fields
        }
        self.out_columns = out_columns
        self.input_columns = input_columns
        self.limit = limit  # an OUTPUT limit held here (deployer.spark.windows.window_limit)
        self.state_schema = T.StructType(
            [
                T.StructField("groups", T.BinaryType()),
                T.StructField("events", T.BinaryType()),
                *([LIMIT_FIELD] if limit is not None else []),
            ]
        )

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.win = handle.getValueState("groups", self.state_schema)
        if self.limit is not None:
            self.limit.init(handle)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        blobs: list[bytes] = []
        for frame in rows:
            frame.columns = self.input_columns
            blobs.extend(frame["__events"].tolist())
        new = unpacked(blobs)
        stored = self.win.get()
        out, kept = self._step(new, loaded(stored))
        window = stored_state(kept) if kept is not None else (None, None)
        if self.limit is None:
            self._keep(stored, window, None)
            if out is not None:
                yield pd.DataFrame({c: out[c] for c in self.out_columns}, copy=False)
            return
        groups = list(out.pop("__group")) if out is not None else []
        wm = timerValues.getCurrentWatermarkInMs()
        frames, limit = self.limit.step(out, groups, wm, None if stored is None else stored[2])
        self._keep(stored, window, limit)
        yield from frames

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        assert self.limit is not None, "only a window that holds a limit registers timers"
        stored = self.win.get()
        wm, expiry = timerValues.getCurrentWatermarkInMs(), expiredTimerInfo.getExpiryTimeInMs()
        frames, limit = self.limit.expired(wm, expiry, None if stored is None else stored[2])
        self._keep(stored, (None, None) if stored is None else (stored[0], stored[1]), limit)
        yield from frames

    def _keep(self, stored: Any, window: tuple[bytes | None, bytes | None], limit: bytes | None) -> None:
        """The bucket's state value: its window's (groups, events) and its limit's, or none."""
        if window[0] is None and limit is None:
            if stored is not None:
                self.win.clear()
        else:
            self.win.update((*window, limit) if self.limit is not None else window)

    def _step(
        self, new: pa.Table, state: tuple[pa.Table, pa.Table] | None
    ) -> tuple[dict[str, Any] | None, tuple[pa.Table, pa.Table] | None]:
        """The windows the new events complete (the output's columns), and the bucket's state after
        them (None: empty); a state is its (groups, events) tables."""
        m = self._merged(new, state)
        # Per group: its events, the windows they complete, where its buffer is cut.
        n = np.bincount(m.elem_group, minlength=len(m.groups))
        base = np.concatenate([[0], np.cumsum(n)[:-1]])
        fired = np.where(n < self.size, 0, (n - self.size) // self.advance + 1)
        cut = fired * self.advance
        skip = m.skip + np.maximum(cut - n, 0)
        cut = np.minimum(cut, n)
        out = self._windows(m.groups, fired, base, new, m.order, m.first_new, m.groups_new, m.seq, m.columns)
        rank = np.arange(len(m.elem_group)) - base[m.elem_group]
        return out, self._kept(m, rank >= cut[m.elem_group], n - cut, skip)

    def _merged(self, new: pa.Table, state: tuple[pa.Table, pa.Table] | None) -> _Merged:
        """The bucket's buffered events and the new ones, group after group, each group's in
        arrival order; the new events a group still had to skip (ADVANCE > SIZE) are left out."""
        # The new events group by group, each group's in arrival order.
        groups_new = new.column("__group").to_numpy()
        seq_new = new.column("__seq").to_numpy()
        order = np.lexsort((seq_new, groups_new))
        groups_new, seq_new = groups_new[order], seq_new[order]
        if state is not None:
            old_groups = state[0].column("__group").to_numpy(zero_copy_only=False).astype(object)
            old_skip = state[0].column("skip").to_numpy().astype(np.int64)
            old_count = state[0].column("count").to_numpy().astype(np.int64)
        else:
            old_groups = np.array([], dtype=object)
            old_skip = old_count = np.array([], dtype=np.int64)
        groups, first_new = np.unique(groups_new, return_index=True)
        groups = np.union1d(groups, old_groups).astype(object)
        n_groups = len(groups)
        g_old = np.searchsorted(groups, old_groups)
        g_new = np.searchsorted(groups, groups_new)
        skip = np.zeros(n_groups, dtype=np.int64)
        skip[g_old] = old_skip
        # Events still to skip (ADVANCE > SIZE) are the first new events of their group.
        start_new = np.searchsorted(g_new, np.arange(n_groups))
        rank_new = np.arange(len(g_new)) - start_new[g_new]
        take_new = rank_new >= skip[g_new]
        skip -= np.minimum(skip, np.bincount(g_new, minlength=n_groups))
        # All events, group after group: the buffered ones, then the new ones.
        elem_group = np.concatenate([np.repeat(g_old, old_count), g_new[take_new]])
        part = np.concatenate(
            [np.zeros(int(old_count.sum()), dtype=np.int8), np.ones(int(take_new.sum()), dtype=np.int8)]
        )
        at = np.lexsort((np.arange(len(elem_group)), part, elem_group))
        old_seq = state[1].column("__seq").to_numpy(zero_copy_only=False) if state is not None else []
        seq = np.concatenate([np.array(old_seq, dtype=object), seq_new[take_new]])[at]
        columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for c in self.value_columns:
            given = new.column(c)
            valid_new = pc.is_valid(given).to_numpy(zero_copy_only=False)[order][take_new]
            values_new = given.fill_null(0).to_numpy()[order][take_new]
            values, valid = self._values(
                values_new, valid_new, state[1].column(c) if state is not None else None, c
            )
            columns[c] = (values[at], valid[at])
        return _Merged(groups, elem_group[at], skip, seq, columns, order, first_new, groups_new)

    def _kept(
        self, m: _Merged, keep: np.ndarray, left: np.ndarray, skip: np.ndarray
    ) -> tuple[pa.Table, pa.Table] | None:
        """The bucket's state after a step: the groups with events left or still to skip."""
        alive = (left > 0) | (skip > 0)
        if not alive.any():
            return None
        kept_groups = pa.table(
            {
                "__group": pa.array(m.groups[alive], type=pa.string()),
                "skip": pa.array(skip[alive], type=pa.int64()),
                "count": pa.array(left[alive], type=pa.int64()),
            }
        )
        kept_events: dict[str, pa.Array] = {}
        for c in self.value_columns:
            values, valid = m.columns[c]
            kept_events[c] = pa.array(values[keep], mask=~valid[keep])
        kept_events["__seq"] = pa.array(m.seq[keep], type=pa.string())
        return kept_groups, pa.table(kept_events)

    def _values(
        self, new: np.ndarray, valid_new: np.ndarray, old: pa.ChunkedArray | None, column: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """A value column's old then new values (a NULL as 0: integers are summed as int64,
        exactly), and which are not NULL."""
        kind = np.int64 if self.integral[column] else np.float64
        if old is None:
            old_values, valid_old = np.array([], dtype=kind), np.array([], dtype=bool)
        else:
            valid_old = pc.is_valid(old).to_numpy(zero_copy_only=False)
            old_values = old.fill_null(0).to_numpy().astype(kind)
        return np.concatenate([old_values, new.astype(kind)]), np.concatenate([valid_old, valid_new])

    def _windows(
        self,
        groups: np.ndarray,
        fired: np.ndarray,
        base: np.ndarray,
        new: pa.Table,
        order: np.ndarray,
        first_new: np.ndarray,
        groups_new: np.ndarray,
        seq: np.ndarray,
        columns: dict[str, tuple[np.ndarray, np.ndarray]],
    ) -> dict[str, Any] | None:
        total = int(fired.sum())
        if not total:
            return None
        win_group = np.repeat(np.arange(len(groups)), fired)
        nth = np.arange(total) - np.repeat(np.cumsum(fired) - fired, fired)
        idx = (base[win_group] + nth * self.advance)[:, None] + np.arange(self.size)[None, :]
        out: dict[str, Any] = {}
        # A group that completes a window has new events: its key values are its first new row's.
        row_of = np.full(len(groups), -1, dtype=np.int64)
        row_of[np.searchsorted(groups, groups_new[first_new])] = order[first_new]
        rows = row_of[win_group]
        take = pa.array(rows)
        for name in self.out_columns:
            if name.startswith("_k"):
                out[name] = new.column(name).take(take).to_pylist()
        errors = np.full(total, None, dtype=object)
        for j, spec in enumerate(self.aggs):
            if spec.column is None:
                out[f"_a{j}"] = np.full(total, self.size, dtype=np.int64)
                continue
            values, valid = columns[spec.column]
            vals, null, failed = reduce_windows(spec, values[idx], valid[idx])
            if null.any():
                vals = vals.astype(object)
                vals[null] = None
            out[f"_a{j}"] = vals
            unset = np.array([e is None for e in errors], dtype=bool)
            errors[failed & unset] = spec.reason  # the first aggregate's that overflowed
        out["__seq"] = seq[idx[:, -1]]
        out[AGG_ERR] = errors
        if self.limit is not None:  # each row's group, for the limit (window_limit.WindowLimit.step)
            out["__group"] = groups[win_group]
        return out

    def close(self) -> None:
        pass


def stored_state(state: tuple[pa.Table, pa.Table]) -> tuple[bytes, bytes]:
    """A bucket's (groups, events) tables as the value kept in Spark's state store."""
    blobs = []
    for table in state:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        blobs.append(sink.getvalue().to_pybytes())
    return blobs[0], blobs[1]


def loaded(stored: Any) -> tuple[pa.Table, pa.Table] | None:
    """The (groups, events) tables of a value kept by `stored_state` (None: no state)."""
    if stored is None or stored[0] is None:  # none, or only a limit's (window_limit.FIELD)
        return None
    return unpacked([stored[0]]), unpacked([stored[1]])


def bucketed_tuple_aggregate(
    prepared: DataFrame,
    size: int,
    advance: int,
    aggs: list[AggSpec],
    buf_schema: T.StructType,
    out_schema: T.StructType,
    limit: WindowLimit | None = None,
) -> DataFrame:
    """`prepared` (`__group`, the group's key as text, then keys, values and `__seq` of each event)
    through BucketedTuple: packed per bucket, shuffled by bucket, aggregated; `limit`: an OUTPUT
    limit the processor holds the rows for (its timers tick on event time)."""
    with_bucket = prepared.select(F.pmod(F.xxhash64("__group"), F.lit(BUCKETS)).alias("__bucket"), "*")

    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in coalesced(batches, PACK_ROWS):
            yield packed(batch, "__bucket")

    packed_schema = T.StructType(
        [T.StructField("__bucket", T.LongType()), T.StructField("__events", T.BinaryType())]
    )
    processor = BucketedTuple(
        size, advance, aggs, buf_schema, [f.name for f in out_schema.fields], packed_schema.names, limit
    )
    return (
        with_bucket.mapInArrow(pack, packed_schema)
        .groupBy(F.col("__bucket"))
        .transformWithStateInPandas(
            statefulProcessor=processor,
            outputStructType=out_schema,
            outputMode="Append",
            timeMode="None" if limit is None else "EventTime",
        )
    )
