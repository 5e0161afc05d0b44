"""`OUTPUT ALL | LAST EVERY duration` inside a TUPLE or BATCH window's processor on Spark
(deployer.spark.output.placement.in_window_processor): a window's rows are held where they are made,
in the state of the key that made them (a group, or a bucket of groups), with no stateful operator,
shuffle, Python worker or state store of the limit's own.

The limiter is deployer.output's (`AllEvery`, `LastEvery`), one per key, fed the rows the key's
windows make in their order key's order (event time, then arrival: the reference executor's), and
ticked by the watermark after each micro-batch's rows and by an event-time timer at its next due
tick, as the limiter's own processor does (deployer.spark.output.processor, whose docstring says why
a tick then sees its whole bucket: a window's row has the time of the event that completed it, and
every event before the watermark has reached the window by the end of the micro-batch).

Rows of many keys leave in one micro-batch, so each carries an order key that sorts them as the
reference emits them at a tick: bucket by bucket; in a bucket, for ALL each row in its own order,
for LAST each group in the order of its first row in the bucket. That is `<bucket end>|<the row's
order key>` (ALL) or `<bucket end>|<the group's first row's order key in the bucket>` (LAST), the
bucket's end written as a window's (deployer.spark.translate.graph.order_key).

A row whose aggregate overflowed (AGG_ERR) and an event a BATCH window refused are not the
limiter's: the reference dead-letters them before the limit, so they leave at once.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle

from deployer.output.limiter import AllEvery, LastEvery, Limiter
from deployer.spark.output.processor import move_timer
from deployer.spark.translate.graph import ORDER_OFFSET, SEQ
from deployer.spark.windows.aggregate_rows import AGG_ERR, REFUSED
from operators.output_node import LAST, OutputRate
from operators.values import US_PER_MS

if TYPE_CHECKING:
    import pandas as pd

STATE_VERSION = 1  # the pickled state's layout: a change refuses an older checkpoint's state
# The limit's state: a field of the window's own state value, so that a micro-batch reads and writes
# one value per key, as the window alone does (each state call is a round trip to the JVM).
FIELD = T.StructField("limit", T.BinaryType())


@dataclass
class _Held:
    """A key's limit: its limiter over rows `(group, order key, values)`, for LAST the order key of
    each group's first row in each bucket (bucket number, group), and the timer it registered."""

    limiter: Limiter
    first: dict[tuple[int, str], str] = field(default_factory=dict)
    timer: int | None = None


class WindowLimit:
    """The limit a window processor holds its rows for: `columns` are the processor's output
    columns, of which the held rows keep the values (not the order key, nor why a row failed). The
    processor keeps the limit's state (`FIELD`, a blob or None) in its own state value and hands it
    to `step` and `expired`, which give it back changed."""

    def __init__(self, node: OutputRate, columns: Sequence[str]) -> None:
        assert node.every_ms is not None
        self.last = node.kind == LAST
        self.every = node.every_ms * US_PER_MS
        self.columns = list(columns)
        self.values = [c for c in columns if c not in (SEQ, AGG_ERR) and not c.startswith(REFUSED)]

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle  # for the timers

    def step(
        self, made: Mapping[str, Any] | None, groups: Sequence[str], watermark_ms: int, blob: bytes | None
    ) -> tuple[list[pd.DataFrame], bytes | None]:
        """What leaves now of the rows made this micro-batch (`made`: the processor's output columns,
        lists or arrays, row i of the group `groups[i]`; None: no row): the failed ones, then what
        the watermark's tick sends; and the limit's state after. Columns, not a DataFrame: building
        one per key and micro-batch to take it apart again was most of the limit's cost."""
        held = self._load(blob)
        frames = []
        if made is not None and len(groups):
            failed = [e is not None for e in made[AGG_ERR]]
            if any(failed):
                frames.append(self._frame({c: _pick(made[c], failed) for c in self.columns if c in made}))
            seqs = list(made[SEQ])
            rows = list(zip(*[_plain(made[c]) for c in self.values], strict=True))
            for i in sorted((i for i, f in enumerate(failed) if not f), key=seqs.__getitem__):
                seq = seqs[i]
                t = int(seq[:20]) - ORDER_OFFSET  # the row's time: its order key starts with it
                if self.last:
                    held.first.setdefault((t // self.every, groups[i]), seq)
                held.limiter.row((groups[i],), (groups[i], seq, rows[i]), t, seq)
        return self._tick(held, watermark_ms, frames)

    def expired(
        self, watermark_ms: int, expired_ms: int, blob: bytes | None
    ) -> tuple[list[pd.DataFrame], bytes | None]:
        """What the tick of a fired timer sends, and the limit's state after."""
        held = self._load(blob)
        if held.timer == expired_ms:
            held.timer = None  # the fired timer is gone: the next one is registered anew
        return self._tick(held, watermark_ms, [])

    def _tick(
        self, held: _Held, watermark_ms: int, frames: list[pd.DataFrame]
    ) -> tuple[list[pd.DataFrame], bytes | None]:
        out = held.limiter.tick(watermark_ms * US_PER_MS)
        if out:
            keys = []
            for (group, seq, _), t in out:
                bucket = t // self.every if t is not None else 0
                end = f"{(bucket + 1) * self.every + ORDER_OFFSET:020d}"
                keys.append(f"{end}|{held.first.pop((bucket, group)) if self.last else seq}")
            rows = [values for (_, _, values), _ in out]
            data: dict[str, Any] = {c: [r[n] for r in rows] for n, c in enumerate(self.values)}
            data[SEQ] = keys
            frames.append(self._frame(data))
        return frames, self._save(held)

    def _frame(self, data: Mapping[str, Any]) -> pd.DataFrame:
        """The processor's output rows from columns; the ones not given are NULL."""
        import pandas as pd  # not at the top: each query start imports this module (architecture.md)

        n = len(data[SEQ])
        none = [None] * n
        return pd.DataFrame({c: pd.Series(list(data.get(c, none)), dtype=object) for c in self.columns})

    def _load(self, blob: bytes | None) -> _Held:
        if blob is None:
            return _Held(LastEvery(self.every) if self.last else AllEvery(self.every))
        version, held = pickle.loads(blob)
        if version != STATE_VERSION:
            raise RuntimeError(
                f"the checkpoint keeps a window's output-rate state of layout {version}, this version "
                f"reads {STATE_VERSION}: run the script on a new checkpoint"
            )
        assert isinstance(held, _Held)
        return held

    def _save(self, held: _Held) -> bytes | None:
        """The limit's state (None: it holds nothing), its timer moved to the next due tick."""
        held.timer = move_timer(self.handle, held.timer, held.limiter.due())
        if held.timer is None:
            return None
        return pickle.dumps((STATE_VERSION, held), protocol=pickle.HIGHEST_PROTOCOL)


def _plain(column: Any) -> list[Any]:
    """A column's values as Python objects (an array's numpy scalars as their Python values), to
    pickle and to hand back to Spark as the processor's other rows are."""
    return column.tolist() if isinstance(column, np.ndarray) else list(column)


def _pick(column: Any, chosen: Sequence[bool]) -> list[Any]:
    return [v for v, c in zip(_plain(column), chosen, strict=True) if c]
