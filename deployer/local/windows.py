"""Window state of the Aggregate operator: aggregate accumulators and the TUPLE, TIME and BATCH windows.

Window state is per group (the GROUP BY key, a tuple in which None is a valid value) and is fed
events in event-time order (on streams with event time) or arrival order.

Semantics (CPL.md section 3; the decisions where the paper is silent are marked DECISION):

- TUPLE SIZE n ADVANCE a: a group's window fires as soon as it holds n events (DECISION: on the
  n-th event, not on the next arrival), then its a oldest events are dropped; when a > n the next
  a - n events of that group are skipped as well, so windows start every a events of the group.
- TIME SIZE s ADVANCE a: hopping windows [k*a, k*a + s) aligned to the epoch; an event belongs
  to every window containing its event time. A window fires once, when the input watermark reaches
  its end, with one row per group that has events in it. DECISION: rows come in window-end order,
  then groups in order of their first event in that window.
- BATCH START p STOP q: per group, an event for which p holds opens a window (when none is open)
  and is its first event; following events are appended; the first later event for which q holds
  is appended and fires the window, which closes. DECISION: STOP is not tested on the event that
  opens the window, so START x = 1 STOP x = 1 makes windows from one marker to the next. Events
  that arrive while no window is open belong to no window.
- Incomplete windows never fire, including at the end of the input.

The Aggregate operator itself (`AggregateOp`, at the end) evaluates keys and aggregate arguments
once per event, when it arrives; an error there dead-letters the event, which then counts in no
window. HAVING and the projections read the aggregated row (key values ++ aggregate values); an
error there dead-letters that row. Aggregate output has no event-time field: rows leave in the order
windows fire; each carries its time (the completing event's; a TIME window's last instant) and the
input's watermark goes on after it closed windows, for an OutputRate's ticks only (runtime).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from deployer.evaluation.aggregates import Aggregates, Values
from deployer.evaluation.evaluate import compile_expr, compile_predicate
from deployer.local.runtime import EVAL_ERRORS, Event, Operator, Runtime
from operators import expr as ir
from operators import graph as g
from operators.values import from_micros

Key = tuple[Any, ...]

# ---- TUPLE -------------------------------------------------------------------------------------------


@dataclass
class _TupleGroup:
    events: deque[Values] = field(default_factory=deque)
    skip: int = 0


class TupleWindows:
    def __init__(self, size: int, advance: int):
        self.size = size
        self.advance = advance
        self.groups: dict[Key, _TupleGroup] = {}

    def add(self, key: Key, values: Values) -> list[Values] | None:
        """Add an event; the window's events when this event completes it, else None."""
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = _TupleGroup()
        if g.skip:
            g.skip -= 1
            return None
        g.events.append(values)
        if len(g.events) < self.size:
            return None
        full = list(g.events)
        for _ in range(min(self.advance, self.size)):
            g.events.popleft()
        g.skip = max(self.advance - self.size, 0)
        return full


# ---- TIME --------------------------------------------------------------------------------------------


class TimeWindows:
    """Hopping windows over event time in microseconds; states kept incrementally per (window, group)."""

    def __init__(self, size_us: int, advance_us: int, new_state: Callable[[], list[Any]]):
        self.size = size_us
        self.advance = advance_us
        self.new_state = new_state
        self.windows: dict[int, dict[Key, list[Any]]] = {}  # start → group → state
        self.starts: list[int] = []  # heap of open window starts

    def assign(self, ts: int) -> range:
        """The starts of every window [start, start + size) containing ts."""
        first = (ts - self.size) // self.advance + 1
        last = ts // self.advance
        return range(first * self.advance, last * self.advance + 1, self.advance)

    def states(self, key: Key, ts: int) -> Iterator[list[Any]]:
        """The state of `key` in every window containing ts, created on first use."""
        for start in self.assign(ts):
            groups = self.windows.get(start)
            if groups is None:
                groups = self.windows[start] = {}
                heapq.heappush(self.starts, start)
            state = groups.get(key)
            if state is None:
                state = groups[key] = self.new_state()
            yield state

    def fire(self, watermark: int) -> Iterator[tuple[int, Key, list[Any]]]:
        """Close every window whose end is <= watermark: (start, key, state), by end then group."""
        while self.starts and self.starts[0] + self.size <= watermark:
            start = heapq.heappop(self.starts)
            for key, state in self.windows.pop(start).items():
                yield start, key, state

    def discard(self) -> None:
        self.windows.clear()
        self.starts.clear()


# ---- BATCH -------------------------------------------------------------------------------------------


class BatchWindows:
    def __init__(self, new_state: Callable[[], list[Any]]):
        self.new_state = new_state
        self.open: dict[Key, list[Any]] = {}  # group → state of its open window

    def is_open(self, key: Key) -> bool:
        return key in self.open

    def start(self, key: Key) -> list[Any]:
        state = self.open[key] = self.new_state()
        return state

    def state(self, key: Key) -> list[Any]:
        return self.open[key]

    def close(self, key: Key) -> list[Any]:
        return self.open.pop(key)


# ---- the operator ------------------------------------------------------------------------------------

_US_PER_MS = 1000


class AggregateOp(Operator):
    node: g.Aggregate

    def __init__(self, node: g.Aggregate, rt: Runtime):
        super().__init__(node, rt)
        self.keys = [compile_expr(k.expr) for k in node.keys]
        aggs = tuple(a.expr for a in node.aggs if isinstance(a.expr, ir.Agg))
        self.aggs = Aggregates(aggs, compile_expr)
        self.having = compile_predicate(node.having) if node.having is not None else None
        self.project = [compile_expr(p.expr) for p in node.projections]
        w = node.window
        self.tuples = TupleWindows(w.size, w.advance) if w.kind == "tuple" else None
        self.times = (
            TimeWindows(w.size * _US_PER_MS, w.advance * _US_PER_MS, self.aggs.new_state)
            if w.kind == "time"
            else None
        )
        self.batches = BatchWindows(self.aggs.new_state) if w.kind == "batch" else None
        self.start: Callable[[Any], bool] | None = None
        self.stop: Callable[[Any], bool] | None = None
        if w.kind == "batch":
            assert w.start is not None and w.stop is not None
            self.start = compile_predicate(w.start)
            self.stop = compile_predicate(w.stop)

    def event(self, i: int, event: Event, ts: int | None) -> None:
        try:
            key = tuple(k(event) for k in self.keys)
            values = self.aggs.arguments(event)
            if self.batches is not None:
                opens = closes = False
                if self.batches.is_open(key):
                    assert self.stop is not None
                    closes = self.stop(event)
                else:
                    assert self.start is not None
                    opens = self.start(event)
        except EVAL_ERRORS as err:
            self.fail(err, event)
            return
        if self.tuples is not None:
            full = self.tuples.add(key, values)
            if full is not None:
                self._output(key, self.aggs.fold(full), ts)
        elif self.times is not None:
            assert ts is not None, "a TIME window's input has event time"
            for state in self.times.states(key, ts):
                self.aggs.add(state, values)
        elif self.batches is not None:
            if opens:
                self.aggs.add(self.batches.start(key), values)
            elif self.batches.is_open(key):
                self.aggs.add(self.batches.state(key), values)
                if closes:
                    state = self.batches.close(key)
                    self._output(key, state, ts)

    def _output(self, key: Key, state: list[Any], ts: int | None, bounds: Event = ()) -> None:
        """Emit a window's row; `ts`: its time, that of the event that completed the window, or the
        last instant a TIME window covers (runtime: for an OutputRate after it)."""
        values, error = self.aggs.result(state)
        row: Event = key + values + bounds
        if error is not None:
            self.fail(error, row)
            return
        try:
            if self.having is not None and not self.having(row):
                # a window's row, not an event: `filtered` counts the events a WHERE drops
                # (docs/guarantees.md), as on Spark
                return
            out = tuple(p(row) for p in self.project)
        except EVAL_ERRORS as err:
            self.fail(err, row)
            return
        self.emit(out, ts)

    def _fire(self, until: int) -> None:
        assert self.times is not None
        for start, key, state in self.times.fire(until):
            # window_start() and window_end() read these, after the aggregates (see graph.Aggregate)
            end = start + self.times.size
            self._output(key, state, end - 1, (from_micros(start), from_micros(end)))

    def watermark(self, i: int, wm: int) -> None:
        # The output has no event-time field: the watermark closes windows, and goes on only for an
        # OutputRate's ticks (runtime); every later row's time is at or after it.
        if self.times is not None:
            self._fire(wm)
        self.emit_watermark(wm)

    def finish(self, final: int | None) -> None:
        # Windows whose end the input's time reached fire; all others are incomplete and never do.
        if self.times is not None:
            if final is not None:
                self._fire(final)
            self.times.discard()

    def end(self, i: int, final: int | None) -> None:
        self.ended[i] = True
        self.finish(final)
        self.emit_end(final)
