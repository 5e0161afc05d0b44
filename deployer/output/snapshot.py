"""OUTPUT SNAPSHOT EVERY T: at every tick, the current row of every live group, changed or not
(SIDDHI-SEMANTICS.md §4, "Snapshot", read in event time; docs/language.md, "Output rate limiting").

The rows are the windowed aggregate's, one per group each time its window fires. At the tick k·T
the current row of a group is its latest row with a time before k·T. Over a TIME window, a group is
live only if it had a row in the latest window that ended by the tick (a window's row carries the
last instant it covers, end - 1): a group whose events have all left the window disappears, as in
Siddhi, and a tick after a window with no events at all sends nothing. Over a TUPLE or BATCH window,
which nothing expires, a group stays live with its latest row.

Over a TIME window the live rows are those of one window, the latest that ended by the tick, and
they come in the order that window's rows came: by their first event in the window, as Siddhi shows
a group where its oldest event still in the window is. A group whose row is older can never be live
again and is dropped, so the state holds the live groups only. (The order was once the order in
which groups first appeared since the last tick with no live group and no row pending: on Spark a
micro-batch brings later windows' rows before such a tick, which then did not forget, so the
engines' orders parted: fuzzer seed 1204.) Over a TUPLE or BATCH window, groups come in the order
they first appeared.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from deployer.output.limiter import Key, Limiter, Out, Row


class Snapshot(Limiter):
    def __init__(self, every: int, window: tuple[int, int] | None) -> None:
        """`every`, and the TIME window's (SIZE, ADVANCE), in microseconds; None: not a TIME window."""
        self.every = every
        self.window = window
        self.pending: deque[tuple[Key, Row, int]] = deque()  # rows not yet before a tick
        # each group's latest row before the last tick: the row, its time, its place in the rows' order
        self.current: dict[Key, tuple[Row, int, int]] = {}
        self.arrived = 0  # rows taken into `current` so far
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
                self.current[key] = (row, t, self.arrived)
                self.arrived += 1
            live = self._live(at)
            out.extend((row, at - 1) for row in live)
            self.next_tick = at + self.every
            if not live and not self.pending and self.window is not None:
                # every group has left its window and no row is coming yet: no tick can show
                # anything until one does, so skip the empty ticks instead of counting them
                self.next_tick = None
        return out

    def _live(self, at: int) -> list[Row]:
        if self.window is None:
            return [row for row, _, _ in self.current.values()]
        size, advance = self.window
        # the latest window [s, s + size) with s a multiple of ADVANCE that ended by `at`; a row of
        # an earlier window is no group's current row at this tick or any later one
        last_end = (at - size) // advance * advance + size
        self.current = {k: v for k, v in self.current.items() if v[1] == last_end - 1}
        return [row for row, _, _ in sorted(self.current.values(), key=lambda v: v[2])]

    def due(self) -> int | None:
        return self.next_tick

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A snapshot pickled before its rows kept their place (a Spark checkpoint's): its groups
        in the order it held them."""
        current = state.get("current", {})
        state["current"] = {
            k: (v[0], v[1], i) if len(v) == 2 else v for i, (k, v) in enumerate(current.items())
        }
        state.setdefault("arrived", len(current))
        self.__dict__.update(state)
