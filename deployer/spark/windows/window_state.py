"""TUPLE and BATCH window aggregates on Spark: per-key ordered state with transformWithStateInPandas.

Spark has no count-based or condition-based windows, so each group keeps its window in state (one
ValueState holding the events currently in it, column by column) and processes its new events in
arrival (`__seq`) order.
The work is vectorised per key: a micro-batch's events for a key are sorted once, the windows they
complete are found with index arithmetic, and the aggregates over all those windows are computed
with numpy reductions over a (windows x size) matrix, not with a Python loop per event.
A TUPLE window over numbers (the common case) goes further in `deployer.spark.windows.tuple_buckets`: state per
bucket of groups, many groups per Python call; this module's per-group path takes the others
(decimals, strings, booleans) and BATCH windows.

Order: the events of one micro-batch are taken in the reference executor's order: event time,
then arrival position (`__seq`; for a Union, input by input), or arrival alone on a stream
without event time. Across micro-batches, a later batch's events come after an earlier one's.
Every stream with event time passes the Sequencer first (deployer.spark.streams.sequencer), which releases
its events in event-time order, micro-batch after micro-batch, holding back those the stream's
watermark has not passed, as the reference does (a stream alone with WATERMARK 0 read from files
holds nothing back: its source marks its late events, and the others come in arrival order, which
is then event-time order: deployer.spark.streams.lateness): so a window over one stream, however out of order
its input and wherever the micro-batches cut it, takes its events in the reference's order. The
streams that meet in a merge (a Union) pass it together (deployer.spark.streams.merge_sequencer): their
events are released below the least of their watermarks, so a micro-batch never brings an event of
one stream that the merge orders before one of another stream released earlier, however the
micro-batches cut each stream, and a window over the merge takes them in the reference's order too.

Each output row carries, as its `__seq`, the order key of the event that completed its window,
so that a sink can write results in the order the reference executor emits them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from deployer.spark.output.placement import limit_held_by
from deployer.spark.translate.columns import col_name, encoded_event, error_column, spark_type
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.graph import SEQ, SparkGraph, order_key
from deployer.spark.windows.aggregate_rows import AGG_ERR, REFUSED, REFUSED_EVENT, finish_aggregate
from deployer.spark.windows.batch_bounds import START_ERR, STOP_ERR, batch_bounds
from deployer.spark.windows.held_events import exact_longs, held_events, longs_as_text, state_columns
from deployer.spark.windows.reduce import AggSpec, agg_spec, reduce_windows
from deployer.spark.windows.state_layout import bucketed
from deployer.spark.windows.tuple_buckets import bucketed_tuple_aggregate
from deployer.spark.windows.window_limit import FIELD as LIMIT_FIELD
from deployer.spark.windows.window_limit import WindowLimit
from operators import expr as ir
from operators import graph as g

if TYPE_CHECKING:
    import pandas as pd


def _tuple_windows(n: int, size: int, advance: int, skip: int) -> tuple[np.ndarray, int, int]:
    """The TUPLE windows that `n` buffered events complete: their events' indices (windows x size),
    where the buffer is cut (the events before are in no open window) and the events still to skip.
    The windows start every ADVANCE events; with ADVANCE > SIZE the rest of the last advance is
    taken from future events."""
    fired = 0 if n < size else (n - size) // advance + 1
    idx = (np.arange(fired) * advance)[:, None] + np.arange(size)[None, :]
    cut = fired * advance
    if cut > n:
        skip += cut - n
        cut = n
    return idx, cut, skip


class WindowProcessor(StatefulProcessor):
    """State per group: the events in its open window (`buf`) and, for TUPLE, events still to skip."""

    def __init__(
        self,
        kind: str,
        size: int,
        advance: int,
        aggs: list[AggSpec],
        buf_schema: T.StructType,
        out_columns: list[str],
        input_columns: list[str],
        refuses: bool = False,
        limit: WindowLimit | None = None,
        longs: tuple[str, ...] = (),
    ):
        self.kind = kind
        self.longs = longs  # the bigint columns, which come as text (held_events.longs_as_text)
        # BATCH: its START or STOP can fail, so the rows carry why (`START_ERR`, `STOP_ERR`) and
        # the event as its dead letter would (`REFUSED_EVENT`), and the processor emits the events
        # whose condition failed in the state that evaluates it (`REFUSED`).
        self.refuses = refuses
        self.size = size
        self.advance = advance
        self.aggs = aggs
        self.buf_schema = buf_schema
        self.value_columns = [f.name for f in buf_schema.fields]
        self.out_columns = out_columns
        self.input_columns = input_columns
        self.limit = limit  # an OUTPUT limit held here (deployer.spark.windows.window_limit)
        self.state_schema = T.StructType(
            [
                T.StructField("skip", T.LongType()),
                T.StructField("open", T.BooleanType()),
                *[T.StructField(f.name, T.ArrayType(f.dataType)) for f in buf_schema.fields],
                *([LIMIT_FIELD] if limit is not None else []),
            ]
        )
        self.held = slice(2, 2 + len(buf_schema.fields))  # the buffered events' columns in the state

    def init(self, handle: StatefulProcessorHandle) -> None:
        # One value per group: the skip count, whether a BATCH window is open, and the buffered
        # events column by column (one array per buffer column). Each state call is a round trip
        # to the JVM and a ListState serializes row by row, so one get and one update per group and
        # micro-batch (instead of a list of events plus a second value: ~7 calls and a pickle per
        # buffered event) is what makes a window cheap per group.
        self.win = handle.getValueState("win", self.state_schema)
        if self.limit is not None:
            self.limit.init(handle)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        frames = list(rows)
        new = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        # PySpark may hand the rows over with positional column names (`_0`, ...): name them.
        new.columns = self.input_columns
        exact_longs(new, self.longs)
        state = self.win.get()  # None for a new group
        new = new.sort_values("__seq", kind="stable")
        old = None
        skip, is_open = 0, False
        if state is not None:
            skip, is_open = int(state[0] or 0), bool(state[1])
            old = held_events(self.buf_schema, state[self.held])
        refused: list[tuple[int, str]] = []
        if self.kind == "tuple":
            events, windows, rest, skip = self._tuple(old, new[self.value_columns], skip)
        else:
            events, windows, rest, is_open = self._batch(old, new, is_open, refused)
        made = self._aggregate(new, events, windows) if windows else None
        limit = None
        if self.limit is not None:  # the rows go to the limit, which says what leaves now
            n = 0 if made is None else len(made[SEQ])
            old_limit = None if state is None else state[-1]
            wm = timerValues.getCurrentWatermarkInMs()
            out, limit = self.limit.step(made, [str(key[0])] * n, wm, old_limit)
        # Keep the window's remaining events (and the skip count and open flag) for the next batch.
        if len(rest) or skip or is_open or limit is not None:
            kept = (skip, is_open, *state_columns(self.buf_schema, rest))
            self.win.update((*kept, limit) if self.limit is not None else kept)
        elif state is not None:
            self.win.clear()
        if self.limit is not None:
            yield from out
        elif made is not None:
            none = [None] * len(made[SEQ])  # the columns of refused events (`_refused`)
            yield pd.DataFrame({c: pd.Series(made.get(c, none), dtype=object) for c in self.out_columns})
        if refused:
            yield self._refused(new, refused)

    def _tuple(
        self, old: pd.DataFrame | None, new: pd.DataFrame, skip: int
    ) -> tuple[pd.DataFrame, list[np.ndarray], pd.DataFrame, int]:
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        dropped = min(skip, len(new))
        new = new.iloc[dropped:]
        skip -= dropped
        events = (
            pd.concat([old, new], ignore_index=True)
            if old is not None and len(old)
            else new.reset_index(drop=True)
        )
        idx, cut, skip = _tuple_windows(len(events), self.size, self.advance, skip)
        return events, [idx] if len(idx) else [], events.iloc[cut:], skip

    def _batch(
        self, old: pd.DataFrame | None, new: pd.DataFrame, is_open: bool, refused: list[tuple[int, str]]
    ) -> tuple[pd.DataFrame, list[np.ndarray], pd.DataFrame, bool]:
        """The windows the new events close, the open window's events, and whether one is open;
        the events whose START or STOP failed where it is evaluated go to `refused`
        (deployer.spark.windows.batch_bounds)."""
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        n = len(new)

        def failed(column: str) -> np.ndarray:
            return new[column].notna().to_numpy() if self.refuses else np.zeros(n, dtype=bool)

        vals = new[self.value_columns]
        held = 0 if old is None else len(old)
        events = pd.concat([old, vals], ignore_index=True) if held else vals.reset_index(drop=True)
        bounds = batch_bounds(
            new["__start"].fillna(False).to_numpy(dtype=bool),
            new["__stop"].fillna(False).to_numpy(dtype=bool),
            failed(START_ERR),
            failed(STOP_ERR),
            held,
            is_open,
        )
        refused.extend(bounds.refused)
        at = bounds.open_at
        rest = events.iloc[at:][bounds.keep[at:]] if at >= 0 else events.iloc[0:0]
        return events, bounds.windows, rest, at >= 0

    def _refused(self, new: pd.DataFrame, refused: list[tuple[int, str]]) -> pd.DataFrame:
        """The events the window refused, as rows of the output: why, and the event itself."""
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        rows = new.iloc[[i for i, _ in refused]]
        out = {c: pd.Series([None] * len(rows), dtype=object) for c in self.out_columns}
        out[REFUSED] = pd.Series([new[why].iloc[i] for i, why in refused], dtype=object)
        out[REFUSED_EVENT] = pd.Series(rows[REFUSED_EVENT].tolist(), dtype=object)
        out["__seq"] = pd.Series(rows["__seq"].tolist(), dtype=object)
        return pd.DataFrame({c: out[c] for c in self.out_columns})

    def _aggregate(
        self, new: pd.DataFrame, events: pd.DataFrame, windows: list[np.ndarray]
    ) -> dict[str, Any]:
        """The rows of the windows the events complete, column by column: Python objects (a
        column of big integers and NULLs would become floats in pandas)."""
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        mats = [w if w.ndim == 2 else w[None, :] for w in windows]  # each: (windows x events) indices
        n_win = sum(m.shape[0] for m in mats)
        out: dict[str, Any] = {}
        # The group's key values, as the rows carry them (all rows of a group have the same).
        for name in self.out_columns:
            if name.startswith("_k"):
                k = new[name].iloc[0]
                out[name] = [None if pd.isna(k) else k] * n_win
        errors: list[str | None] = [None] * n_win
        for j, spec in enumerate(self.aggs):
            if spec.column is None:
                out[f"_a{j}"] = [m.shape[1] for m in mats for _ in range(m.shape[0])]
                continue
            series = events[spec.column]
            valid_all = series.notna().to_numpy()
            if series.dtype.kind in "iuf":
                values_all = series.fillna(0).to_numpy()
            else:
                values_all = series.astype(object).to_numpy()
            results: list[Any] = []
            failed: list[bool] = []
            for idx in mats:
                vals, null, bad = reduce_windows(spec, values_all[idx], valid_all[idx])
                results.extend(None if z else v for v, z in zip(vals.tolist(), null.tolist(), strict=True))
                failed.extend(bad.tolist())
            out[f"_a{j}"] = results
            errors = [
                e if e is not None or not f else spec.reason for e, f in zip(errors, failed, strict=True)
            ]
        out[AGG_ERR] = errors
        # The order key of the event that completed each window: the output's place in the order.
        seqs = events["__seq"].to_numpy(dtype=object)
        out["__seq"] = [seqs[i] for m in mats for i in m[:, -1]]
        return out

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        assert self.limit is not None, "only a window that holds a limit registers timers"
        state = self.win.get()
        wm, expiry = timerValues.getCurrentWatermarkInMs(), expiredTimerInfo.getExpiryTimeInMs()
        out, limit = self.limit.expired(wm, expiry, None if state is None else state[-1])
        if state is not None:  # the window's part unchanged; none left when it holds nothing
            idle = not state[0] and not state[1] and not any(len(c or []) for c in state[self.held])
            self.win.clear() if idle and limit is None else self.win.update((*state[:-1], limit))
        yield from out

    def close(self) -> None:
        pass


@dataclass
class _Buffered:
    """What an Aggregate over a TUPLE or BATCH window keeps of each event, as Columns: its group's
    key values (`_k<i>`), the value of each aggregate (`_v<j>`), and for BATCH the START and STOP
    conditions; and how each aggregate reads its value."""

    keys: list[Column]
    values: list[Column]
    value_fields: list[T.StructField]
    extra: list[Column]
    aggs: list[AggSpec]
    micros: set[int]  # aggregates computed over epoch microseconds (min/max of a timestamp)
    refuses: bool = False  # BATCH: START or STOP can fail (the window's state tells which counts)


def _buffered(c: ExprCompiler, node: g.Aggregate) -> _Buffered:
    keys = [c.compile(k.expr).cast(spark_type(k.expr.type)).alias(f"_k{i}") for i, k in enumerate(node.keys)]
    b = _Buffered(keys, [], [], [], [], set())
    for j, a in enumerate(node.aggs):
        agg = a.expr
        assert isinstance(agg, ir.Agg)
        if agg.arg is None:
            b.aggs.append(agg_spec(agg, None))
            continue
        # values in the argument's type: sums and averages are computed exactly in Python (reduce.py)
        t = spark_type(agg.arg.type)
        value = c.compile(agg.arg).cast(t)
        if isinstance(t, T.TimestampType):
            # a timestamp: as epoch microseconds, exact and independent of the Python workers' local
            # time zone (the state would hand datetimes back in it); the result of min/max turns back
            # into a timestamp in `_finish`, count's stays a count.
            value, t = F.unix_micros(value), T.LongType()
            if agg.func in ("min", "max"):
                b.micros.add(j)
        b.values.append(value.alias(f"_v{j}"))
        b.value_fields.append(T.StructField(f"_v{j}", t))
        b.aggs.append(agg_spec(agg, f"_v{j}"))
    if node.window.kind == "batch":
        assert node.window.start is not None and node.window.stop is not None
        # Compiled apart from the keys and arguments: those are evaluated for every event (their
        # failures split off before the state), START only while no window is open and STOP only
        # inside one, so whether their failure counts is the state's to say (WindowProcessor._batch).
        on_start, on_stop = ExprCompiler(), ExprCompiler()
        start, stop = on_start.compile(node.window.start), on_stop.compile(node.window.stop)
        b.extra = [start.alias("__start"), stop.alias("__stop")]
        start_err, stop_err = error_column(on_start.errors), error_column(on_stop.errors)
        if start_err is not None or stop_err is not None:
            b.refuses = True
            failing = F.lit(False)
            for err in (start_err, stop_err):
                failing = failing | (err.isNotNull() if err is not None else F.lit(False))
            event = [(F.col(col_name(i)), spark_type(f.type)) for i, f in enumerate(node.input_schema)]
            b.extra += [
                (start_err if start_err is not None else F.lit(None).cast("string")).alias(START_ERR),
                (stop_err if stop_err is not None else F.lit(None).cast("string")).alias(STOP_ERR),
                # only for the events that may be refused: the others never need it
                F.when(failing, F.to_json(encoded_event(event))).alias(REFUSED_EVENT),
            ]
    return b


def tuple_or_batch_aggregate(sg: SparkGraph, node: g.Aggregate) -> DataFrame:
    """An Aggregate over a TUPLE or BATCH window: per-bucket state for a TUPLE window over numbers
    (deployer.spark.windows.tuple_buckets), per-group state (`WindowProcessor`) for the others."""
    df = sg.input(node)
    c = ExprCompiler()
    b = _buffered(c, node)
    df = sg.split_errors(node, df, c.errors, len(node.input_schema), on_input=True)
    key_fields = [T.StructField(f"_k{i}", spark_type(k.expr.type)) for i, k in enumerate(node.keys)]
    # The state is keyed by the group's values as JSON text: never NULL (PySpark hands a NULL
    # grouping key to the processor as NaN, one row at a time), and one group for no GROUP BY.
    group = F.to_json(F.struct(*b.keys)) if b.keys else F.lit("")
    buf_schema = T.StructType([*b.value_fields, T.StructField(SEQ, T.StringType())])
    out_fields = [
        *key_fields,
        *[
            T.StructField(f"_a{j}", T.LongType() if j in b.micros else spark_type(a.expr.type))
            for j, a in enumerate(node.aggs)
        ],
        T.StructField(SEQ, T.StringType()),
        T.StructField(AGG_ERR, T.StringType()),
    ]
    if b.refuses:
        out_fields += [T.StructField(REFUSED, T.StringType()), T.StructField(REFUSED_EVENT, T.StringType())]
    out_schema = T.StructType(out_fields)
    # Events are processed in the order key: event time, then arrival (see the module docstring).
    ts_index = sg.event_time_index(node.inputs[0])
    order = F.col(SEQ)
    if ts_index is not None:
        order = F.concat(order_key(F.col(col_name(ts_index))), F.lit("|"), order)
    # an OUTPUT limit over the window's rows, held by the window's processor (output/placement.py)
    held = limit_held_by(sg.graph, node)
    limit = WindowLimit(held, [f.name for f in out_fields]) if held is not None else None
    if bucketed(node):
        prepared = df.select(group.alias("__group"), *b.keys, *b.values, order.alias(SEQ))
        result = bucketed_tuple_aggregate(
            prepared, node.window.size, node.window.advance, b.aggs, buf_schema, out_schema, limit
        )
        return _finish(sg, node, result, b.micros)
    prepared, longs = longs_as_text(
        df.select(group.alias("__group"), *b.keys, *b.values, *b.extra, order.alias(SEQ))
    )
    processor = WindowProcessor(
        node.window.kind,
        node.window.size,
        node.window.advance,
        b.aggs,
        buf_schema,
        [f.name for f in out_fields],
        prepared.columns,
        b.refuses,
        limit,
        longs,
    )
    result = prepared.groupBy(F.col("__group")).transformWithStateInPandas(
        statefulProcessor=processor,
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="None" if limit is None else "EventTime",
    )
    return _finish(sg, node, result, b.micros, b.refuses)


def _finish(
    sg: SparkGraph, node: g.Aggregate, result: DataFrame, micros: set[int], refuses: bool = False
) -> DataFrame:
    """The processor's rows as the aggregated row (keys, aggregates, `__seq`), then HAVING and the
    projections."""
    nk = len(node.keys)
    row = result.select(
        *[F.col(f"_k{i}").alias(col_name(i)) for i in range(nk)],
        *[
            (F.timestamp_micros(F.col(f"_a{j}")) if j in micros else F.col(f"_a{j}")).alias(col_name(nk + j))
            for j in range(len(node.aggs))
        ],
        F.col(SEQ),
        F.col(AGG_ERR),
        *([F.col(REFUSED), F.col(REFUSED_EVENT)] if refuses else []),
    )
    return finish_aggregate(sg, node, row, refuses)
