"""The Pattern operator in the reference executor: its inputs merged into one event-time order (time,
then input in the order the streams first appear in the pattern, then arrival: `runtime.Merger`,
the Union's rule), each event fed to the automaton of its partition key (deployer.patterns), and the
merge's watermark passing the deadlines of every key (absences that held, WITHIN that ran out).

Matches go out in event-time order: a match's time is its completing event's, or the deadline of the
absence that completed it, which is at most the merge's watermark; so the rows are held until the
watermark reaches their time, released in the order of `runner.Emit.order`, and the output's
watermark is the merge's.

At the end of a bounded input the merge releases the events still waiting, unless an input's rows
come out of time order on Spark (`node.in_time_order`: a join's, another pattern's with PARTITION
BY): Spark's operator takes such events only once its watermark passes them, so here too only those
the final watermark has passed are taken (docs/language.md, "Rows out of time order").
"""

from __future__ import annotations

import heapq
from typing import Any

from deployer import settings
from deployer.local.runtime import Event, MergedOperator, Runtime
from deployer.patterns.matcher import KeyState
from deployer.patterns.runner import Emit, Fail, PatternRunner
from operators import graph as g


class PatternOp(MergedOperator):
    node: g.Pattern

    def __init__(self, node: g.Pattern, rt: Runtime):
        super().__init__(node, rt)
        self.merge.below_final = node.in_time_order
        self.runner = PatternRunner(node, settings.current().pattern_max_partials)
        self.keys: dict[Any, KeyState] = {}
        self.deadlines: list[tuple[int, int, Any]] = []  # (time, key rank, key): a key's next deadline
        # the time of each key's entry in `deadlines`: one per key; an entry at another time is stale
        self.watched: dict[Any, int] = {}
        self.rank: dict[Any, int] = {}
        self.held: list[tuple[int, str, int, Event]] = []  # rows waiting for the watermark
        self.seq = 0

    def passed(self, limit: int | None) -> None:
        if isinstance(limit, int):
            self._advance(limit)
            self._release(limit)

    def finish(self, final: int | None) -> None:
        if final is not None:
            self._advance(final)
        self._release(None)
        self.emit_end(final)

    def _state(self, key: Any) -> KeyState:
        state = self.keys.get(key)
        if state is None:
            state = self.keys[key] = self.runner.new_state()
            self.rank[key] = len(self.rank)
        return state

    def merged(self, i: int, ts: int, event: Event) -> None:
        key = self.runner.key(i, event)
        m = self.runner.matcher(self._state(key))
        self.seq += 1
        self._handle(self.runner.on_event(m, i, event, ts, f"{self.seq:012d}"))
        self._settle(key, m)

    def _settle(self, key: Any, m: Any) -> None:
        """Watch the key's next deadline, or forget the key when it is as new (its state no longer
        holds anything an event could find: keys that go quiet leave nothing behind)."""
        if self.keys[key].fresh(self.runner.program):
            del self.keys[key], self.rank[key]
            self.watched.pop(key, None)
            return
        self._watch(key, m.next_deadline())

    def _watch(self, key: Any, deadline: int | None) -> None:
        """Watch the key's next deadline: an entry only when it moved (an entry per event made the
        heap grow with every event of a key that stays open, each popped and pushed again at each
        of its deadlines: per-event work that grew with the run)."""
        if deadline is None:
            self.watched.pop(key, None)
        elif self.watched.get(key) != deadline:
            self.watched[key] = deadline
            heapq.heappush(self.deadlines, (deadline, self.rank[key], key))

    def _advance(self, until: int) -> None:
        """Let every key's deadlines up to `until` pass, the earliest first."""
        while self.deadlines and self.deadlines[0][0] <= until:
            t, _, key = heapq.heappop(self.deadlines)
            if key not in self.keys or self.watched.get(key) != t:
                continue  # a key forgotten, or an entry its deadline moved away from
            del self.watched[key]
            m = self.runner.matcher(self.keys[key])
            nxt = m.next_deadline()
            if nxt is None or nxt > until:
                self._watch(key, nxt)
                continue
            self._handle(self.runner.on_time(m, until))
            self._settle(key, m)

    def _handle(self, out: list[Emit | Fail]) -> None:
        for o in out:
            if isinstance(o, Fail):
                self.fail(o.reason, o.event)
            else:
                heapq.heappush(self.held, (o.time, o.order, len(self.held), o.values))

    def _release(self, limit: int | None) -> None:
        """The held rows up to `limit` (all: None), in match-time order, and the output's watermark."""
        while self.held and (limit is None or self.held[0][0] <= limit):
            t, _, _, values = heapq.heappop(self.held)
            # the match time, with or without a field for it, for an OutputRate after it (runtime)
            self.emit(values, t)
        if limit is not None:
            self.forward_watermark(limit)
