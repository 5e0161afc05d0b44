"""OUTPUT SNAPSHOT EVERY T: at every tick, the current row of every live group, changed or not
(SIDDHI-SEMANTICS.md §4, "Snapshot", read in event time; docs/language.md, "Output rate limiting").

The rows are the windowed aggregate's, one per group each time its window fires. At the tick k·T
the current row of a group is its latest row with a time before k·T. Over a TIME window, a group is
live only if it had a row in the latest window that ended by the tick (a window's row carries the
last instant it covers, end - 1): a group whose events have all left the window disappears, as in
Siddhi, and a tick after a window with no events at all sends nothing. Over a TUPLE or BATCH window,
which nothing expires, a group stays live with its latest row. Groups come in the order they first
appeared.
"""

from __future__ import annotations

from collections import deque

from deployer.output.limiter import Key, Limiter, Out, Row


class Snapshot(Limiter):
    def __init__(self, every: int, window: tuple[int, int] | None) -> None:
        """`every`, and the TIME window's (SIZE, ADVANCE), in microseconds; None: not a TIME window."""
        self.every = every
        self.window = window
        self.pending: deque[tuple[Key, Row, int]] = deque()  # rows not yet before a tick
        self.current: dict[Key, tuple[Row, int]] = {}  # each group's latest row before the last tick
        self.next_tick: int | None = None  # None: nothing to show until a row comes

    def row(self, key: Key, row: Row, t: int | None, order: str = "") -> Out:
        assert t is not None, "a snapshot's rows have a time"
        self.pending.append((key, row, t))
        if self.next_tick is None:
            self.next_tick = (t // self.every + 1) * self.every
        return []

    def tick(self, wm: int) -> Out:
        out: Out = []
        while self.next_tick is not None and self.next_tick <= wm:
            at = self.next_tick
            while self.pending and self.pending[0][2] < at:
                key, row, t = self.pending.popleft()
                self.current[key] = (row, t)
            live = self._live(at)
            out.extend((row, at - 1) for row in live)
            self.next_tick = at + self.every
            if not live and not self.pending and self.window is not None:
                # every group has left its window and no row is coming yet: no tick can show
                # anything until one does, so skip the empty ticks instead of counting them
                self.current.clear()
                self.next_tick = None
        return out

    def _live(self, at: int) -> list[Row]:
        if self.window is None:
            return [row for row, _ in self.current.values()]
        size, advance = self.window
        # the latest window [s, s + size) with s a multiple of ADVANCE that ended by `at`
        last_end = (at - size) // advance * advance + size
        return [row for row, t in self.current.values() if t == last_end - 1]

    def due(self) -> int | None:
        return self.next_tick
