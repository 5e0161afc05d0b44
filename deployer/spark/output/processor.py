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

A row crosses to Python as four columns, whatever the statement's: its group (the key values as
JSON text), its time (µs), its order key and its values (JSON text, which the limiter passes on
without reading): the pandas API hands them over as a few arrays, where the row-based one built a
Row per row (most of the operator's cost: README, "Output rate limiting"), and no value goes
through a pandas column (an integer column with a NULL would become floats there). Rows leave with
an order key of their own, a counter kept in the state: the order they leave in, as the reference
executor emits them, and the same when a micro-batch is replayed from a checkpoint.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from deployer.output.factory import adopted, limiter_for
from deployer.output.limiter import Limiter, Out
from operators.output_node import OutputRate
from operators.values import US_PER_MS

if TYPE_CHECKING:
    import pandas as pd

STATE_VERSION = 2  # the pickled state's layout: a change refuses an older checkpoint's state
GROUP = "__g"  # the row's group key values, JSON text
TIME = "__t"  # the row's time in µs, NULL when the limiter needs none
VALUES = "__v"  # the row's values, JSON text
SEQ = "__seq"
COLUMNS = ["__key", GROUP, TIME, SEQ, VALUES]  # `__key`: the one grouping key, ""
STATE = T.StructType(
    [
        T.StructField("version", T.IntegerType()),
        T.StructField("limiter", T.BinaryType()),
        T.StructField("timer", T.LongType()),
        T.StructField("sent", T.LongType()),
    ]
)


class OutputProcessor(StatefulProcessor):
    """See the module docstring. Input frames: COLUMNS; output frames: VALUES, TIME and SEQ (the values,
    the row's time and its order key), and `mark` if given."""

    def __init__(self, node: OutputRate, mark: str | None) -> None:
        self.node = node
        # When the output's time is its event time (a timestamp, not µs): the column of the row's time
        # a microsecond on, which Spark checks against the watermark (deployer.spark.translate.ties).
        self.mark = mark

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
        return adopted(self.node, pickle.loads(blob)), timer, int(sent)

    def _save(self, limiter: Limiter, old_timer: int | None, sent: int) -> None:
        timer = move_timer(self.handle, old_timer, limiter.due())
        self.state.update(
            (STATE_VERSION, pickle.dumps(limiter, protocol=pickle.HIGHEST_PROTOCOL), timer, sent)
        )

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        frames = list(rows)
        new = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        new.columns = COLUMNS  # PySpark may hand the columns over with positional names
        # a NULL time (a count's rows without event time): ordered by `__seq` alone
        stamps = [None if pd.isna(t) else int(t) for t in new[TIME].tolist()]
        seqs, groups, values = new[SEQ].tolist(), new[GROUP].tolist(), new[VALUES].tolist()
        order = sorted(range(len(new)), key=lambda i: (stamps[i] or 0, seqs[i]))
        limiter, timer, sent = self._load()
        out: Out = []
        for i in order:
            out.extend(limiter.row(groups[i], values[i], stamps[i], seqs[i]))
        out += limiter.tick(timerValues.getCurrentWatermarkInMs() * US_PER_MS)
        frame, sent = _frame(out, sent, self.mark)
        self._save(limiter, timer, sent)
        yield frame

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        limiter, timer, sent = self._load()
        out = limiter.tick(timerValues.getCurrentWatermarkInMs() * US_PER_MS)
        frame, sent = _frame(out, sent, self.mark)
        # the fired timer is gone: the next one is registered anew
        self._save(limiter, None if timer == expiredTimerInfo.getExpiryTimeInMs() else timer, sent)
        yield frame

    def close(self) -> None:
        pass


def move_timer(handle: StatefulProcessorHandle, old: int | None, due: int | None) -> int | None:
    """A limiter's one event-time timer moved to its next due tick (`due`, µs; None: nothing is
    due): the old one (ms) deleted, the new one registered; the new one, in ms."""
    timer = None if due is None else -(-due // US_PER_MS)
    if timer != old:
        if old is not None:
            handle.deleteTimer(old)
        if timer is not None:
            handle.registerTimer(timer)
    return timer


def _frame(out: Out, sent: int, mark: str | None) -> tuple[pd.DataFrame, int]:
    """The rows let out, each with its time and its order key: the counter of rows sent so far; with
    `mark`, the output's time is a timestamp, and `mark` is it a microsecond on."""
    import pandas as pd  # not at the top: each query start imports this module (architecture.md)

    seqs = [f"{n:020d}" for n in range(sent + 1, sent + len(out) + 1)]
    times = pd.Series([t for _, t in out], dtype="Int64")
    columns = {
        VALUES: pd.Series([v for v, _ in out], dtype=object),
        TIME: pd.to_datetime(times, unit="us", utc=True) if mark else times,
        SEQ: pd.Series(seqs, dtype=object),
    }
    if mark:
        columns[mark] = pd.to_datetime(times + 1, unit="us", utc=True)
    return pd.DataFrame(columns, columns=list(columns)), sent + len(out)
