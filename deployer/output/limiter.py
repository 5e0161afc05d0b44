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
from itertools import pairwise
from typing import Any

Key = tuple[Any, ...]
Row = tuple[Any, ...]
Out = list[tuple[Row, int | None]]  # rows to emit, each with its time


class Limiter:
    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:  # pragma: no cover - overridden
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

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
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

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
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

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
        self.latest[key] = (row, t)  # a dict keeps a key's first place when its value is replaced
        self.count += 1
        if self.count < self.n:
            return []
        out = list(self.latest.values())
        self.count, self.latest = 0, {}
        return out


# ---- EVERY duration ----------------------------------------------------------------------------------


class AllEvery(Limiter):
    """Every row, held until the tick that closes its bucket; an empty bucket sends nothing.

    Rows come in time order on the reference executor. On Spark they come in that order per group
    of the operator before (a pattern's partition key, say), but a micro-batch may bring one
    partition's rows far ahead of another's: a partition whose own events moved its matches on,
    then another's absences fired by the watermark in the next micro-batch. So a row behind the
    latest one (`unordered`) makes `tick` and `due` look at every held row, not the first alone,
    and `tick` lets the closed ones out by time, then `order` (the row's order key on Spark), as the
    reference executor's came."""

    unordered = False  # a class default: limiters pickled before it have no such attribute

    def __init__(self, every: int) -> None:
        self.every = every
        # in arrival order: (row, time, order key); a limiter pickled before kept (row, time)
        self.pending: deque[tuple[Any, ...]] = deque()

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
        assert t is not None, "a time-based limit reads rows with a time"
        if self.pending and t < self.pending[-1][1]:
            self.unordered = True
        self.pending.append((row, t, order))
        return []

    def tick(self, wm: int) -> Out:
        closed = wm // self.every * self.every
        if self.unordered:
            due = sorted((e for e in self.pending if e[1] < closed), key=lambda e: (e[1], e[2:]))
            if due:
                self.pending = deque(e for e in self.pending if e[1] >= closed)
                times = [e[1] for e in self.pending]
                self.unordered = any(a > b for a, b in pairwise(times))
            return [(e[0], e[1]) for e in due]
        out: Out = []
        while self.pending and self.pending[0][1] < closed:
            e = self.pending.popleft()
            out.append((e[0], e[1]))
        return out

    def due(self) -> int | None:
        if not self.pending:
            return None
        first = min(e[1] for e in self.pending) if self.unordered else self.pending[0][1]
        return (first // self.every + 1) * self.every


class LastEvery(Limiter):
    """Per bucket, the latest row of each group (of the statement, without GROUP BY), sent at the
    tick that closes the bucket, the groups in the order they first appeared in it."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.buckets: dict[int, dict[Key, tuple[Row, int]]] = {}  # bucket number → its groups

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
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

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
        assert t is not None, "a time-based limit reads rows with a time"
        last = self.last.get(key)
        if last is not None and t - last < self.every:
            return []
        self.last[key] = t
        return [(row, t)]
