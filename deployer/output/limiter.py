"""What an OutputRate node lets through, and when: Siddhi's output rate limiting (SIDDHI-SEMANTICS.md §4)
read in event time. Plain Python over rows, their group keys and their times, with no runtime of its
own, so that an engine feeds it rows and watermarks: the reference executor does
(deployer.local.output_rate), and a keyed stateful operator on Spark can hold the same state per
group.

Times are microseconds of event time; `every` is the limit's period in microseconds. A tick is the
watermark reaching k·every on the epoch: the rows whose time is before it are all in, and the bucket
[(k-1)·every, k·every) closes (a row exactly on a tick belongs to the bucket that starts there).

Every limiter answers `row` (a row arrives: what goes out now), `tick` (the watermark moved: what
goes out), `end` (the input is over: what goes out; the rest is dropped) and `due` (the earliest
watermark at which `tick` has something to do: an engine with timers sets one there).
"""

from __future__ import annotations

from collections import deque
from typing import Any

Key = tuple[Any, ...]
Row = tuple[Any, ...]
Out = list[tuple[Row, int | None]]  # rows to emit, each with its time


class Limiter:
    def row(self, key: Key, row: Row, t: int | None) -> Out:  # pragma: no cover - overridden
        raise NotImplementedError

    def tick(self, wm: int) -> Out:
        return []

    def end(self, final: int | None) -> Out:
        """End of input: the ticks up to the final watermark happen; a bucket they do not close is
        dropped, as an incomplete window never fires (and as Siddhi never emits a partial EVENTS one)."""
        return self.tick(final) if final is not None else []

    def due(self) -> int | None:
        return None


# ---- EVERY n EVENTS --------------------------------------------------------------------------------


class AllEvents(Limiter):
    """Every row, in buckets of n: the n-th row sends the whole bucket out."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.bucket: list[tuple[Row, int | None]] = []

    def row(self, key: Key, row: Row, t: int | None) -> Out:
        self.bucket.append((row, t))
        if len(self.bucket) < self.n:
            return []
        out, self.bucket = self.bucket, []
        return out


class FirstEvents(Limiter):
    """Rows 1, n+1, 2n+1, ... of each group, at once (Siddhi counts per group for FIRST)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen: dict[Key, int] = {}

    def row(self, key: Key, row: Row, t: int | None) -> Out:
        seen = self.seen.get(key, 0)
        self.seen[key] = (seen + 1) % self.n
        return [(row, t)] if seen == 0 else []


class LastEvents(Limiter):
    """One counter for all groups (Siddhi's rule for LAST): at every n-th row, the latest row of each
    group seen in that bucket, in the order the groups first appeared in it."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.latest: dict[Key, tuple[Row, int | None]] = {}

    def row(self, key: Key, row: Row, t: int | None) -> Out:
        self.latest[key] = (row, t)  # a dict keeps a key's first place when its value is replaced
        self.count += 1
        if self.count < self.n:
            return []
        out = list(self.latest.values())
        self.count, self.latest = 0, {}
        return out


# ---- EVERY duration ----------------------------------------------------------------------------------


class AllEvery(Limiter):
    """Every row, held until the tick that closes its bucket; an empty bucket sends nothing."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.pending: deque[tuple[Row, int]] = deque()  # in time order: rows come in time order

    def row(self, key: Key, row: Row, t: int | None) -> Out:
        assert t is not None, "a time-based limit reads rows with a time"
        self.pending.append((row, t))
        return []

    def tick(self, wm: int) -> Out:
        closed = wm // self.every * self.every
        out: Out = []
        while self.pending and self.pending[0][1] < closed:
            row, t = self.pending.popleft()
            out.append((row, t))
        return out

    def due(self) -> int | None:
        return (self.pending[0][1] // self.every + 1) * self.every if self.pending else None


class LastEvery(Limiter):
    """Per bucket, the latest row of each group (of the statement, without GROUP BY), sent at the
    tick that closes the bucket, the groups in the order they first appeared in it."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.buckets: dict[int, dict[Key, tuple[Row, int]]] = {}  # bucket number → its groups

    def row(self, key: Key, row: Row, t: int | None) -> Out:
        assert t is not None, "a time-based limit reads rows with a time"
        self.buckets.setdefault(t // self.every, {})[key] = (row, t)
        return []

    def tick(self, wm: int) -> Out:
        out: Out = []
        for b in sorted(self.buckets):
            if (b + 1) * self.every > wm:
                break
            out.extend(self.buckets.pop(b).values())
        return out

    def due(self) -> int | None:
        return (min(self.buckets) + 1) * self.every if self.buckets else None


class FirstEvery(Limiter):
    """No ticks: a row goes out at once when at least `every` of event time has passed since the
    last row that went out (of its group)."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.last: dict[Key, int] = {}

    def row(self, key: Key, row: Row, t: int | None) -> Out:
        assert t is not None, "a time-based limit reads rows with a time"
        last = self.last.get(key)
        if last is not None and t - last < self.every:
            return []
        self.last[key] = t
        return [(row, t)]
