"""The OutputRate operator's stateful processor on Spark: the limiter of deployer.output, held in the
state store between micro-batches, so that both engines let through the same rows at the same ticks.

The limiter sees every row of the statement, in the reference executor's order, under one key: its
counters and buckets can span the statement's groups (LAST ... EVENTS keeps one counter for all of
them, as Siddhi does), and what it holds is small (a bucket's rows, a group's latest row). Per
micro-batch it takes the rows sorted by their time, then their order key (`__seq`), then lets the
watermark tick: every row before that watermark has arrived by then (a later micro-batch brings
none: Spark's watermark for late rows is this one), so a tick sees its whole bucket whatever the
micro-batches. An event-time timer at the limiter's next due tick lets the watermark tick when no
row comes.

Rows leave with an order key of their own, a counter kept in the state: the order they leave in, as
the reference executor emits them, and the same when a micro-batch is replayed from a checkpoint.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from deployer.output.factory import limiter_for
from deployer.output.limiter import Limiter, Out
from operators.output_node import OutputRate
from operators.values import from_micros

STATE_VERSION = 1  # the pickled state's layout: a change refuses an older checkpoint's state
TIME = "__t"  # a row's time in µs, NULL when the limiter needs none
STATE = T.StructType(
    [
        T.StructField("version", T.IntegerType()),
        T.StructField("limiter", T.BinaryType()),
        T.StructField("timer", T.LongType()),
        T.StructField("sent", T.LongType()),
    ]
)
_US_PER_MS = 1000


class OutputProcessor(StatefulProcessor):
    """See the module docstring. Input rows: the node's input columns (`_0`...), `__t`, `__seq`;
    output rows: its first `width` columns and `__seq`. Timestamps come in as µs (a Row's would be
    in the worker's local time) and leave as aware datetimes; the limiter only passes values on."""

    def __init__(self, node: OutputRate, out_names: list[str], in_names: list[str]) -> None:
        self.node = node
        self.out_names = out_names
        self.in_names = in_names
        self.width = node.width
        self.keys = slice(node.width, node.width + len(node.group_by))
        self.stamps = [i for i, f in enumerate(node.schema) if f.type.kind == "timestamp"]

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("limiter", STATE)

    def _load(self) -> tuple[Limiter, int | None, int]:
        stored = self.state.get()
        if stored is None:
            return limiter_for(self.node), None, 0
        version, blob, timer, sent = stored
        if version != STATE_VERSION:
            raise RuntimeError(
                f"the checkpoint keeps output-rate state of layout {version}, this version reads "
                f"{STATE_VERSION}: run the script on a new checkpoint"
            )
        limiter: Limiter = pickle.loads(blob)
        return limiter, timer, sent

    def _save(self, limiter: Limiter, old_timer: int | None, sent: int) -> None:
        due = limiter.due()
        timer = None if due is None else -(-due // _US_PER_MS)
        if timer != old_timer:
            if old_timer is not None:
                self.handle.deleteTimer(old_timer)
            if timer is not None:
                self.handle.registerTimer(timer)
        self.state.update(
            (STATE_VERSION, pickle.dumps(limiter, protocol=pickle.HIGHEST_PROTOCOL), timer, sent)
        )

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        limiter, timer, sent = self._load()
        out: Out = []
        for row in sorted(rows, key=lambda r: (r[TIME] or 0, r["__seq"])):
            values = tuple(row[name] for name in self.in_names)
            out += limiter.row(values[self.keys], values[: self.width], row[TIME])
        out += limiter.tick(timerValues.getCurrentWatermarkInMs() * _US_PER_MS)
        rows_out, sent = self._rows(out, sent)
        self._save(limiter, timer, sent)
        yield from rows_out

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:
        limiter, timer, sent = self._load()
        out = limiter.tick(timerValues.getCurrentWatermarkInMs() * _US_PER_MS)
        rows_out, sent = self._rows(out, sent)
        # the fired timer is gone: the next one is registered anew
        self._save(limiter, None if timer == expiredTimerInfo.getExpiryTimeInMs() else timer, sent)
        yield from rows_out

    def _rows(self, out: Out, sent: int) -> tuple[list[Row], int]:
        rows = []
        for values, _ in out:
            sent += 1
            fields = list(values)
            for i in self.stamps:
                if fields[i] is not None:
                    fields[i] = from_micros(fields[i])
            rows.append(Row(**dict(zip(self.out_names, (*fields, f"{sent:020d}"), strict=True))))
        return rows, sent

    def close(self) -> None:
        pass
