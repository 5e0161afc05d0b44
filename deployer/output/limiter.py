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

Rows come in time order on the reference executor; on Spark, after a pattern with PARTITION BY, in
time order per partition only (a micro-batch may bring one partition's matches before another's
earlier absences, which fire by the next watermark). The limiters that hold rows until a tick (ALL
and LAST EVERY duration) choose and order them by rank, time then order key, so their rows do not
depend on arrival; one that decides as a row comes (EVENTS, FIRST EVERY duration) is fed there by
`InTimeOrder`, the rows the watermark has passed, by rank (docs/language.md, "Output rate
limiting").
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

Key = tuple[Any, ...]
Row = tuple[Any, ...]
Out = list[tuple[Row, int | None]]  # rows to emit, each with its time
# a row's place among the limiter's rows: its time, its order key (on Spark the operator before's, the
# reference executor's order at one time; empty on the reference executor), then its arrival
Rank = tuple[int, str, int]


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
    """Every row, held until the tick that closes its bucket; an empty bucket sends nothing. A tick
    lets the closed rows out by their rank: a row that came behind a later one (on Spark, from
    another partition of a pattern) goes out when its bucket closes, in its place."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.held: list[tuple[Rank, Row]] = []  # a heap by rank
        self.arrived = 0

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
        assert t is not None, "a time-based limit reads rows with a time"
        heapq.heappush(self.held, ((t, order, self.arrived), row))
        self.arrived += 1
        return []

    def tick(self, wm: int) -> Out:
        closed = wm // self.every * self.every
        out: Out = []
        while self.held and self.held[0][0][0] < closed:
            (t, _, _), row = heapq.heappop(self.held)
            out.append((row, t))
        return out

    def due(self) -> int | None:
        return (self.held[0][0][0] // self.every + 1) * self.every if self.held else None

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A limiter pickled before rows had a rank kept them in arrival order, in `pending`: as
        (row, time) pairs, or (row, time, order key) triples with an `unordered` flag."""
        if "pending" in state:
            pending = state.pop("pending")
            state.pop("unordered", None)
            state["held"] = [((e[1], e[2] if len(e) > 2 else "", i), e[0]) for i, e in enumerate(pending)]
            heapq.heapify(state["held"])
            state["arrived"] = len(pending)
        self.__dict__.update(state)


class LastEvery(Limiter):
    """Per bucket, the latest row of each group (of the statement, without GROUP BY), sent at the
    tick that closes the bucket, the groups in the order of their first row in it. Latest and first
    by rank, not by arrival: on Spark a bucket's rows of one partition of a pattern may come a
    micro-batch after a later row of another's."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.buckets: dict[int, dict[Key, _Kept]] = {}  # bucket number → its groups
        self.arrived = 0

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
        assert t is not None, "a time-based limit reads rows with a time"
        rank = (t, order, self.arrived)
        self.arrived += 1
        groups = self.buckets.setdefault(t // self.every, {})
        kept = groups.get(key)
        if kept is None:
            groups[key] = _Kept(rank, rank, row)
        else:
            kept.first = min(kept.first, rank)
            if rank > kept.latest:
                kept.latest, kept.row = rank, row
        return []

    def tick(self, wm: int) -> Out:
        out: Out = []
        for b in sorted(self.buckets):
            if (b + 1) * self.every > wm:
                break
            groups = sorted(self.buckets.pop(b).values(), key=lambda k: k.first)
            out.extend((k.row, k.latest[0]) for k in groups)
        return out

    def due(self) -> int | None:
        return (min(self.buckets) + 1) * self.every if self.buckets else None

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A limiter pickled before rows had a rank kept each group's (row, time), the groups in the
        order they first came: that order is kept, ahead of the bucket's later groups' ranks."""
        if "arrived" not in state:
            n = 0
            for b, groups in state["buckets"].items():
                for key, (row, t) in groups.items():
                    groups[key] = _Kept((b * state["every"], "", n), (t, "", n), row)
                    n += 1
            state["arrived"] = n
        self.__dict__.update(state)


@dataclass(slots=True)
class _Kept:
    """A group's row in a LAST bucket: the rank of its first row, and its latest row with its rank."""

    first: Rank
    latest: Rank
    row: Row


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


# ---- rows that may come out of time order -------------------------------------------------------------


class InTimeOrder(Limiter):
    """Another limiter (EVENTS, FIRST EVERY duration) fed a row only once the watermark has passed
    its time, then in rank order: such a limiter decides as a row comes, so a row behind a later one
    would change what it let out. After a pattern with PARTITION BY, Spark brings rows in time order
    per partition only (module docstring); every row before the watermark has come by the time it
    ticks, so fed from here the inner limiter sees the reference executor's order whatever the
    micro-batches. At the end of a bounded input, rows the final watermark has not passed are
    dropped, as a bucket it does not close is (docs/language.md, "Output rate limiting")."""

    def __init__(self, inner: Limiter) -> None:
        self.inner = inner
        self.held: list[tuple[Rank, Key, Row]] = []  # a heap by rank
        self.arrived = 0

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
        assert t is not None, "rows out of time order are those of a pattern, which have a time"
        heapq.heappush(self.held, ((t, order, self.arrived), key, row))
        self.arrived += 1
        return []

    def tick(self, wm: int) -> Out:
        out: Out = []
        while self.held and self.held[0][0][0] < wm:
            (t, order, _), key, row = heapq.heappop(self.held)
            out += self.inner.row(key, row, t, order)
        return out + self.inner.tick(wm)

    def due(self) -> int | None:
        """The watermark past the earliest held row's time (`tick` feeds rows before the watermark),
        or the inner limiter's next tick, whichever comes first."""
        held = self.held[0][0][0] + 1 if self.held else None
        inner = self.inner.due()
        return min((d for d in (held, inner) if d is not None), default=None)
