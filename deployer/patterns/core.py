"""The automaton of one partition key, the part that does not depend on events: its partials, their
states, and time passing (deadlines decided, WITHIN running out). deployer.patterns.matcher drives it
with events; docs/language.md ("Patterns") says what it means."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from deployer.patterns.partial import Partial, Pending, Ranked
from deployer.patterns.program import ABSENCE, LOGICAL, STEP, AbsenceCode, Program, StepCode

Values = tuple[Any, ...]

EXPIRE, DEADLINE = 0, 1  # timer kinds: at equal times a WITHIN expiry goes first
BOUND = (1, 2)  # Partial.sides: which side of an AND/OR is bound
CANCELLED = (4, 8)  # ... which absence side was cancelled
PASSED = (16, 32)  # ... which absence side held until its deadline


@dataclass(frozen=True)
class Match:
    """A completed partial: its slots, the match time (µs), and whether an event completed it (else
    a deadline: an absence that held)."""

    partial: Partial
    time: int
    by_event: bool


@dataclass(frozen=True)
class Dropped:
    """A partial dropped because its key held more than the cap of open partials, oldest first."""

    partial: Partial


class Refused(Exception):
    """An event whose condition could not be evaluated (the reason): it changed nothing."""


class KeyState:
    """What one key keeps between events: plain data, pickled as a whole between micro-batches."""

    __slots__ = ("armed", "first", "key", "live", "next_order", "next_tag", "pending", "timers")

    def __init__(self, program: Program) -> None:
        self.pending: list[Pending | Ranked] = [
            Pending(st.keyed) if st.rank is None else Ranked(st.rank) for st in program.states
        ]
        self.timers: list[tuple[int, int, int, int, Partial]] = []  # (time, kind, order, tag, partial)
        self.next_order = 0
        self.next_tag = 0
        self.first: int | None = None  # the key's first event time: a leading absence counts from it
        self.armed = False
        self.live: dict[int, Partial] = {}  # every partial not yet completed, dropped or dead
        self.key = ""  # the partition key as text, set by its first event (deployer.patterns.runner)

    def __setstate__(self, state: tuple[dict[str, Any] | None, dict[str, Any]]) -> None:
        """Pickled slots; a state pickled before `key` existed has none: the empty text."""
        self.key = ""
        for name, value in state[1].items():
            setattr(self, name, value)

    def fresh(self, program: Program) -> bool:
        """Whether the key is as its next event would find a key it never saw (an engine may then
        drop its state): no deadline pending, and nothing waiting but the unused start of an EVERY
        (which that event would arm again). A key whose pattern has no EVERY at its start keeps a
        few bytes for ever once it started: it must not start again. It relies on the start not
        completing a match by itself: a pattern whose every element can take no event is a compile
        error (cpl.plan_pattern; a kept key and a new one would disagree, fuzzer seed 40101)."""
        if any(not p.dead and (kind == EXPIRE or p.timer == tag) for _, kind, _, tag, p in self.timers):
            return False
        if not (program.states[0].every == 0 and program.states[0].kind == STEP):
            return False  # used up, or waiting at its start: either way, not as new
        return all(set(p.homes) == {0} and all(s is None for s in p.slots) for p in self.live.values())


class AutomatonCore:
    """The automaton of one key over `state`; `cap`: the most partials the key may hold, beyond which
    the oldest is dropped (and reported)."""

    def __init__(self, program: Program, state: KeyState, cap: int | None = None) -> None:
        self.p = program
        self.s = state
        self.cap = cap
        self.out: list[Match | Dropped] = []
        self._later: list[tuple[Partial, int, int]] = []  # entries made by the event being applied

    # ---- partials -----------------------------------------------------------------------------------

    def _new(self, slots: list[Any], start: int | None, entered: int) -> Partial:
        p = Partial(slots, self.s.next_order, start, entered)
        self.s.next_order += 1
        self.s.live[p.order] = p
        if self.cap is not None and len(self.s.live) > self.cap:
            # the cap counts partial matches: the start waiting unused at state 0 is none
            waiting = [q for q in self.s.live.values() if not self._is_armed(q) and q is not p]
            fresh = all(s is None for s in slots)  # not yet at a state: an unused start, or a copy
            if len(waiting) + (0 if fresh else 1) > self.cap and waiting:
                self._kill(waiting[0])
                self.out.append(Dropped(waiting[0]))
        return p

    def _is_armed(self, p: Partial) -> bool:
        """A start not yet used: no slot bound, waiting at state 0."""
        return all(s is None for s in p.slots) and 0 in p.homes

    def _kill(self, p: Partial) -> None:
        for state in list(p.homes):
            self.s.pending[state].remove(p, state)
        p.dead = True
        p.timer = None
        self.s.live.pop(p.order, None)

    def _copy(self, p: Partial, keep: int, entered: int) -> Partial:
        """A copy of `p` with its slots before `keep` (EVERY); a counted slot's list is copied, its
        events are not."""
        slots = [(list(s) if isinstance(s, list) else s) if i < keep else None for i, s in enumerate(p.slots)]
        start = p.start if any(s is not None for s in slots) else None
        return self._new(slots, start, entered)

    def _arm(self, t: int) -> None:
        """The first partial, at the start state, when the key's first event comes."""
        if self.s.armed:
            return
        self.s.armed = True
        self._enter(self._new([None] * len(self.p.automaton.slots), None, t), 0, t)

    def _schedule(self, p: Partial, at: int, kind: int) -> None:
        self.s.next_tag += 1
        p.timer = self.s.next_tag if kind == DEADLINE else p.timer
        heapq.heappush(self.s.timers, (at, kind, p.order, self.s.next_tag, p))

    def _valid(self, entry: tuple[int, int, int, int, Partial]) -> bool:
        _, kind, _, tag, p = entry
        if p.dead:
            return False
        return kind == EXPIRE or p.timer == tag

    # ---- time -------------------------------------------------------------------------------------------

    def _fire(self, until: int) -> None:
        timers = self.s.timers
        while timers and timers[0][0] <= until:
            entry = heapq.heappop(timers)
            if not self._valid(entry):
                continue
            at, kind, _, _, p = entry
            if kind == EXPIRE:
                self._expire(p, at)
            else:
                self._deadline(p, at)

    def _expire(self, p: Partial, at: int) -> None:
        """`p`'s WITHIN ran out at `at` (its start + WITHIN + 1 µs): it is dropped, and the EVERY
        scope it was in starts again."""
        homes = sorted(p.homes)
        self._kill(p)
        for state in homes:
            scope = self._scope(state)
            if scope is not None:
                copy = self._copy(p, scope, at)
                if copy.start is not None and self._expired(copy, at):
                    self._kill(copy)
                else:
                    self._enter(copy, scope, at)
                return

    def _scope(self, state: int) -> int | None:
        """The start of the EVERY scope `state` is in, if any."""
        for end in range(state, len(self.p.states)):
            every = self.p.states[end].every
            if every is not None and every <= state:
                return every
        return None

    def _expired(self, p: Partial, now: int) -> bool:
        w = self.p.within_us
        return w is not None and p.start is not None and now - p.start > w

    def _watch(self, p: Partial) -> None:
        """Schedule `p`'s WITHIN expiry once it has a start."""
        if self.p.within_us is not None and p.start is not None:
            self._schedule(p, p.start + self.p.within_us + 1, EXPIRE)

    def _deadline(self, p: Partial, at: int) -> None:
        """An absence of `p` held until `at`."""
        state = next((s for s in p.homes if self.p.states[s].kind in (ABSENCE, LOGICAL)), None)
        if state is None:
            return
        st = self.p.states[state]
        if st.kind == ABSENCE:
            self._complete(p, state, at, by_event=False)
            return
        for k, side in enumerate(st.sides):
            if (
                isinstance(side, AbsenceCode)
                and not p.sides & CANCELLED[k]
                and p.entered + (side.wait_us or 0) <= at
            ):
                p.sides |= PASSED[k]
        self._logical_done(p, state, at, by_event=False)
        if not p.dead:
            self._schedule_logical(p, state)

    # ---- entering and leaving states ---------------------------------------------------------------

    def _enter(self, p: Partial, state: int, t: int) -> None:
        """`p` reaches `state` at time `t`."""
        st = self.p.states[state]
        p.entered = t
        armed = all(s is None for s in p.slots) and (state == 0 or 0 in p.homes)
        if self.p.sequence and not armed:
            # a sequence holds one partial per state: the newest replaces the one waiting there
            for other in self.s.pending[state].all():
                if other is not p and not self._is_armed(other):
                    self._kill(other)
        side = st.sides[0]
        key = side.partial_key(p) if isinstance(side, StepCode) and side.partial_key is not None else None
        self.s.pending[state].add(p, state, key)
        if st.kind == ABSENCE:
            assert isinstance(side, AbsenceCode) and side.wait_us is not None
            self._schedule(p, t + side.wait_us, DEADLINE)
        elif st.kind == LOGICAL:
            p.sides = 0
            for k, s in enumerate(st.sides):
                if isinstance(s, AbsenceCode) and s.wait_us is None:
                    p.sides |= PASSED[k]  # NOT s[c] AND b: holds until an s comes
            self._schedule_logical(p, state)
        elif isinstance(side, StepCode) and side.min == 0:
            self._min_reached(p, state, t, by_event=False)

    def _schedule_logical(self, p: Partial, state: int) -> None:
        waits = [
            p.entered + s.wait_us
            for k, s in enumerate(self.p.states[state].sides)
            if isinstance(s, AbsenceCode)
            and s.wait_us is not None
            and not p.sides & (CANCELLED[k] | PASSED[k])
        ]
        if waits:
            self._schedule(p, min(waits), DEADLINE)
        else:
            p.timer = None

    def _leave(self, p: Partial, state: int) -> None:
        self.s.pending[state].remove(p, state)

    def _complete(self, p: Partial, state: int, t: int, by_event: bool) -> None:
        """`p` completed `state` at `t`: EVERY starts its scope again, and `p` goes on (or matches)."""
        if self._expired(p, t):
            self._kill(p)
            return
        for home in list(p.homes):
            self._leave(p, home)
        p.timer = None
        st = self.p.states[state]
        if st.every is not None:
            copy = self._copy(p, st.every, t)
            self._go(copy, st.every, t, by_event)
        if state == self.p.last:
            self.s.live.pop(p.order, None)
            p.dead = True
            self.out.append(Match(p, t, by_event))
        else:
            self._go(p, state + 1, t, by_event)

    def _go(self, p: Partial, state: int, t: int, by_event: bool) -> None:
        """`p` moves on to `state`: at once when time moved it, after the event when an event did."""
        if by_event:
            self._later.append((p, state, t))
        else:
            self._enter(p, state, t)

    def _min_reached(self, p: Partial, state: int, t: int, by_event: bool) -> None:
        """A counted step holds its minimum: it may end now (the last state: match once) or go on
        to the next state while it keeps collecting; EVERY starts again at the count (not at a
        minimum of 0 held on arrival: nothing was counted)."""
        st = self.p.states[state]
        side = st.sides[0]
        counted = isinstance(side, StepCode) and p.slots[side.slot] is not None
        if st.every is not None and counted:
            self._go(self._copy(p, st.every, t), st.every, t, by_event)
        if state == self.p.last:
            if not self._expired(p, t):
                self._kill(p)
                self.out.append(Match(p, t, by_event))
            return
        nxt = state + 1
        if nxt not in p.homes:
            self._enter(p, nxt, t)

    def _logical_done(self, p: Partial, state: int, t: int, by_event: bool) -> None:
        st = self.p.states[state]
        done = [bool(p.sides & (BOUND[k] | PASSED[k])) and not p.sides & CANCELLED[k] for k in (0, 1)]
        if (st.op == "or" and any(done)) or (st.op == "and" and all(done)):
            self._complete(p, state, t, by_event)
