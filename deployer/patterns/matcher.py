"""The automaton of one partition key, fed its events in event-time order and told where time is.

This is the executable form of the pattern semantics of docs/language.md ("Patterns"): Siddhi's
(../shared/SIDDHI-SEMANTICS.md §1-3) read in event time. Both engines run it: the reference executor
event by event (deployer.local.patterns), Spark inside its stateful processor, one key at a time,
with the key's state pickled in between (deployer.spark.patterns).

An event at time t first lets time pass up to t: the deadlines at or before t are decided (an absence
that held until its deadline passes; a partial whose WITHIN ran out is dropped), oldest first. Then the
event is tried against the partials waiting for its stream, at every state, the last state first; all
its conditions are evaluated before anything changes, so an event whose condition fails (a failed
CAST, a division by zero) changes nothing and is dead-lettered whole (`Refused`). A partial that it
moves on reaches its next state after the event, so one event fills at most one step of a partial.
`advance(wm)` decides the deadlines the watermark passed. The outcome of each is a list of `Match`es
(and `Dropped` partials, beyond the cap on open partials), in the order they happen.
"""

from __future__ import annotations

import heapq

from deployer.evaluation.evaluate import EVAL_ERRORS
from deployer.patterns.core import (
    BOUND,
    CANCELLED,
    DEADLINE,
    PASSED,
    AutomatonCore,
    Dropped,
    KeyState,
    Match,
    Refused,
    Values,
)
from deployer.patterns.partial import Partial
from deployer.patterns.program import ABSENCE, LOGICAL, STEP, AbsenceCode, StepCode

__all__ = ["Dropped", "KeyState", "Match", "Matcher", "Refused"]


class Matcher(AutomatonCore):
    """The automaton of one key over `state` (see the module docstring). `cap`: the most partials the
    key may hold; beyond it the oldest is dropped (and reported)."""

    # ---- the two inputs --------------------------------------------------------------------------

    def event(self, inp: int, values: Values, t: int) -> tuple[list[Match | Dropped], str | None]:
        """Feed one event of input `inp` at time `t` (µs): what happened, and why the event was
        refused when a condition failed on it (time has then passed up to t, nothing else changed)."""
        self.out = []
        if self.s.first is None:
            self.s.first = t
        self._arm(t)
        self._fire(t)
        try:
            plan = self._decide(inp, values)
        except Refused as err:
            return self.out, str(err)
        self._apply(plan, values, t)
        return self.out, None

    def advance(self, until: int) -> list[Match | Dropped]:
        """Decide the deadlines at or before `until` (µs): no event before it can come any more."""
        self.out = []
        self._fire(until)
        return self.out

    def next_deadline(self) -> int | None:
        """When `advance` would next do something (the earliest live timer), for an engine's timer."""
        timers = self.s.timers
        while timers and not self._valid(timers[0]):
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    # ---- an event -----------------------------------------------------------------------------------

    def _decide(self, inp: int, values: Values) -> list[tuple[int, int, Partial, bool]]:
        """Every (state, side, partial) the event reaches, with whether it fits: evaluated before
        anything changes, so that a condition that fails leaves the key as it was."""
        plan: list[tuple[int, int, Partial, bool]] = []
        try:
            for state, k in self.p.by_input[inp]:
                st = self.p.states[state]
                side = st.sides[k]
                if st.kind == STEP and isinstance(side, StepCode) and side.event_key is not None:
                    cands = self.s.pending[state].candidates(side.event_key(values))
                else:
                    cands = self.s.pending[state].candidates()
                test = side.test
                for p in cands:
                    if st.kind == LOGICAL and p.sides & (BOUND[k] | CANCELLED[k]):
                        continue
                    held = p.sides & PASSED[k] and isinstance(side, AbsenceCode) and side.wait_us is not None
                    if st.kind == LOGICAL and held:
                        continue  # an absence that held until its deadline: later events do not matter
                    plan.append((state, k, p, True if test is None else test(values, p)))
        except EVAL_ERRORS as err:
            raise Refused(str(err) or type(err).__name__) from None
        return plan

    def _apply(self, plan: list[tuple[int, int, Partial, bool]], values: Values, t: int) -> None:
        self._later = []
        touched: set[int] = set()  # the partials the event moved on, extended or bound a side of
        extended = False
        for state, k, p, fits in plan:
            if p.dead or state not in p.homes:
                continue
            st = self.p.states[state]
            side = st.sides[k]
            if st.kind == ABSENCE:
                if fits:
                    self._absent_event(p, state, t)
                continue
            if not fits:
                continue
            if st.kind == LOGICAL:
                touched.add(p.order)
                self._logical_event(p, state, k, values, t)
                extended = extended or not (state == self.p.last and p.dead)
                continue
            assert isinstance(side, StepCode)
            if self.p.sequence and state == 0 and self._is_armed(p) and extended:
                continue  # a sequence: an event that extended a partial does not also start one
            touched.add(p.order)
            if p.start is None:
                p.start = t
                self._watch(p)
            if not side.counted:
                p.slots[side.slot] = values
                if state != self.p.last:
                    extended = True
                self._complete(p, state, t, by_event=True)
                continue
            held = p.slots[side.slot]
            if held is None:
                held = p.slots[side.slot] = []
            held.append(values)
            extended = extended or state != self.p.last or len(held) < side.min
            if len(held) == side.min:
                self._min_reached(p, state, t, by_event=True)
            elif len(held) == 1 and side.min == 0 and self.p.states[state].every is not None:
                # a minimum of 0 was held on arrival: EVERY starts again at the first event counted
                every = self.p.states[state].every
                assert every is not None
                self._go(self._copy(p, every, t), every, t, by_event=True)
            elif len(held) > side.min and state + 1 in p.homes and self.p.states[state + 1].kind == ABSENCE:
                self._enter(p, state + 1, t)  # an absence after a count counts from its last event
            if side.max is not None and len(held) >= side.max and state in p.homes:
                self._leave(p, state)  # full: it waits at the next state only
        if self.p.sequence:
            self._strict(touched)
        later, self._later = self._later, []
        for p, state, at in later:
            if not p.dead:
                self._enter(p, state, at)

    def _strict(self, touched: set[int]) -> None:
        """A sequence: a partial the event did not move on dies (absences wait on; a start not yet
        begun is no partial)."""
        for state, st in enumerate(self.p.states):
            if st.kind == ABSENCE:
                continue
            for p in self.s.pending[state].all():
                if p.order not in touched and not self._is_armed(p):
                    if st.kind == LOGICAL and _waits(st.sides) and not p.sides & (BOUND[0] | BOUND[1]):
                        continue  # an AND/OR with an absence: nothing of it came yet, it waits on
                    self._kill(p)

    def _absent_event(self, p: Partial, state: int, t: int) -> None:
        """An event fitting an absence: it cancels the partial; a leading absence (the start state)
        of a pattern waits again from it, as does one under EVERY in a sequence."""
        st = self.p.states[state]
        restart = state == 0 and (not self.p.sequence or st.every == 0)
        if restart:
            side = st.sides[0]
            assert isinstance(side, AbsenceCode) and side.wait_us is not None
            p.entered = t
            self._schedule(p, t + side.wait_us, DEADLINE)
            return
        self._kill(p)

    def _logical_event(self, p: Partial, state: int, k: int, values: Values, t: int) -> None:
        st = self.p.states[state]
        side = st.sides[k]
        if isinstance(side, AbsenceCode) and side.wait_us is None:
            p.sides |= CANCELLED[k]  # NOT s AND b: an s spoils the b to come (`_spoiled`)
            return
        if isinstance(side, AbsenceCode):
            if st.op == "and" or self.p.sequence:
                self._kill(p)  # an AND needs the absence; a sequence's OR dies whole
                return
            p.sides |= CANCELLED[k]
            other = st.sides[1 - k]
            if isinstance(other, AbsenceCode) and p.sides & CANCELLED[1 - k]:
                self._kill(p)
            else:
                self._schedule_logical(p, state)
            return
        assert isinstance(side, StepCode)
        p.slots[side.slot] = values
        if p.start is None:
            p.start = t
            self._watch(p)
        p.sides |= BOUND[k]
        other = st.sides[1 - k]
        if isinstance(other, AbsenceCode) and other.wait_us is None and p.sides & CANCELLED[1 - k]:
            self._spoiled(p, state, t)
            return
        self._logical_done(p, state, t, by_event=True)

    def _spoiled(self, p: Partial, state: int, t: int) -> None:
        """`NOT s AND b` whose b came after an s: no match; under EVERY the scope starts again (a
        later b can match: Siddhi's "X spoils IBM, ORACLE matches")."""
        self._kill(p)
        every = self.p.states[state].every
        if every is not None:
            self._go(self._copy(p, every, t), every, t, by_event=True)


def _waits(sides: tuple[StepCode | AbsenceCode, ...]) -> bool:
    return any(isinstance(s, AbsenceCode) for s in sides)
