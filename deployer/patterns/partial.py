"""A partial match, and the partials waiting at one state of the automaton.

A partial holds one slot per alias: None (not bound), the event (a tuple of values) its step took, or
the list of events its counted step collected. An event is stored once, in the slots of the partials
that took it: a copy of a partial (EVERY) copies the list of slots, never the events, and the state
store keeps them shared (deployer.spark.patterns.processor pickles the whole key, which writes each event
once).

The partials waiting at a state are kept in their order of arrival there (the oldest is tried first,
and completes first: docs/language.md, "Patterns"), in buckets by the value of the state's key when
its condition has one (`operators.patterns.Condition.key`): an event then looks only at the partials
of its own value, so the work per event does not grow with the partials that wait for other values
(`Pending`); or, when the link is a comparison (`operators.patterns.Condition.rank`), sorted by
the value, so that an event looks only at those the comparison lets through (`Ranked`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from typing import Any

# A partial whose key is NULL can never fit the state's equality: kept apart, never looked at.
NEVER = object()


class Partial:
    """One partial match. `order` is its rank among the key's partials (creation order);
    `entered` the event time (µs) at which it reached its current state; `start` the time of its
    first event (WITHIN counts from it), None while it holds none. `homes`: the states where it
    waits (two for a counted step that holds its minimum: its own and the next), each with its
    bucket there. `sides`: for an AND/OR state, which sides are bound (1 left, 2 right); for an
    absence side, which ones were cancelled (4 left, 8 right). `timer`: the tag of the deadline it
    waits for, if any."""

    __slots__ = ("dead", "entered", "homes", "order", "sides", "slots", "start", "timer")

    def __init__(self, slots: list[Any], order: int, start: int | None, entered: int) -> None:
        self.slots = slots
        self.order = order
        self.start = start
        self.entered = entered
        self.homes: dict[int, Any] = {}
        self.sides = 0
        self.timer: int | None = None
        self.dead = False

    def copy(self, order: int, keep: int, entered: int) -> Partial:
        """A new partial with this one's slots before `keep` and none after (EVERY)."""
        slots = [s if i < keep else None for i, s in enumerate(self.slots)]
        start = self.start if any(s is not None for s in slots) else None
        return Partial(slots, order, start, entered)

    def __repr__(self) -> str:  # for tests and debugging
        return f"Partial(#{self.order}, at {sorted(self.homes)}, slots={self.slots})"


def _hashable(v: Any) -> Any:
    """A key value as a dict key: NULL never matches; NaN equals nothing (a bucket of its own that
    no event finds is right, since NaN = NaN is not true)."""
    if v is None:
        return NEVER
    if isinstance(v, float) and math.isnan(v):
        return NEVER
    return v


class _Waiting:
    """What `Pending` and `Ranked` share: emptying a state."""

    __slots__ = ()

    def all(self) -> list[Partial]:  # pragma: no cover - both override
        raise NotImplementedError

    def _empty(self) -> None:  # pragma: no cover - both override
        raise NotImplementedError

    def clear(self, state: int) -> list[Partial]:
        """Every partial waiting here, no longer waiting here."""
        gone = self.all()
        for p in gone:
            p.homes.pop(state, None)
        self._empty()
        return gone


class Pending(_Waiting):
    """The partials waiting at one state, oldest first; in buckets by the partial's value of the
    state's key when it has one (see the module docstring). Plain data, so that a key's state
    pickles without the compiled conditions."""

    __slots__ = ("buckets", "items", "keyed")

    def __init__(self, keyed: bool) -> None:
        self.keyed = keyed
        self.items: dict[int, Partial] = {}  # unkeyed: order -> partial
        self.buckets: dict[Any, dict[int, Partial]] = {}

    def add(self, p: Partial, state: int, key: Any = None) -> None:
        """Add `p`; `key`: its value of the state's key (keyed states)."""
        if not self.keyed:
            self.items[p.order] = p
            p.homes[state] = None
            return
        k = _hashable(key)
        bucket = self.buckets.get(k)
        if bucket is None:
            bucket = self.buckets[k] = {}
        bucket[p.order] = p
        p.homes[state] = k

    def remove(self, p: Partial, state: int) -> None:
        k = p.homes.pop(state, None)
        if not self.keyed:
            self.items.pop(p.order, None)
            return
        bucket = self.buckets.get(k)
        if bucket is not None:
            bucket.pop(p.order, None)
            if not bucket:
                del self.buckets[k]

    def candidates(self, event_key: Any = None) -> list[Partial]:
        """The partials an event may fit: all of them, or those of its key's bucket."""
        if not self.keyed:
            return list(self.items.values())
        k = _hashable(event_key)
        if k is NEVER:
            return []
        bucket = self.buckets.get(k)
        return list(bucket.values()) if bucket else []

    def all(self) -> list[Partial]:
        if not self.keyed:
            return list(self.items.values())
        out = [p for b in self.buckets.values() for p in b.values()]
        out.sort(key=lambda p: p.order)
        return out

    def __len__(self) -> int:
        if not self.keyed:
            return len(self.items)
        return sum(len(b) for b in self.buckets.values())

    def _empty(self) -> None:
        self.items.clear()
        self.buckets.clear()


class Ranked(_Waiting):
    """The partials waiting at a state whose condition compares the event with a value the partial
    fixed earlier (`duration > e1.duration`: `operators.patterns.Condition.rank`), sorted by that
    value: an event looks only at the partials the comparison lets through (found by bisection), so
    the work per event grows with the partials it may fit, not with all those waiting. `op` is the
    comparison, the event's value on its left. Candidates come in their order of arrival here, as
    `Pending`'s do (`arrived` numbers them); a NULL value never compares true and is not ranked.
    Same interface as `Pending`; plain data."""

    __slots__ = ("arrived", "items", "op", "ranks")

    def __init__(self, op: str) -> None:
        self.op = op
        self.arrived = 0
        self.items: dict[int, Partial] = {}  # arrival number -> partial, every one waiting here
        self.ranks: list[tuple[Any, int]] = []  # (value, arrival number), sorted; no NULL value

    def add(self, p: Partial, state: int, key: Any = None) -> None:
        n = self.arrived
        self.arrived += 1
        self.items[n] = p
        p.homes[state] = (key, n)
        if key is not None:
            bisect.insort(self.ranks, (key, n))

    def remove(self, p: Partial, state: int) -> None:
        home = p.homes.pop(state, None)
        if home is None:
            return
        key, n = home
        self.items.pop(n, None)
        if key is not None:
            i = bisect.bisect_left(self.ranks, (key, n))
            if i < len(self.ranks) and self.ranks[i][1] == n:
                del self.ranks[i]

    def candidates(self, event_key: Any = None) -> list[Partial]:
        """The partials whose value `event_key OP value` holds for, in their order of arrival."""
        if event_key is None:
            return []
        r, op = self.ranks, self.op
        # (v,) sorts before every (v, n), (v, inf) after them all
        if op == ">":  # value < event
            hits = r[: bisect.bisect_left(r, (event_key,))]
        elif op == ">=":  # value <= event
            hits = r[: bisect.bisect_left(r, (event_key, math.inf))]
        elif op == "<":  # value > event
            hits = r[bisect.bisect_left(r, (event_key, math.inf)) :]
        else:  # "<=": value >= event
            hits = r[bisect.bisect_left(r, (event_key,)) :]
        if len(hits) == len(self.items):
            return list(self.items.values())
        return [self.items[n] for n in sorted(n for _, n in hits)]

    def all(self) -> list[Partial]:
        return list(self.items.values())

    def __len__(self) -> int:
        return len(self.items)

    def _empty(self) -> None:
        self.items.clear()
        self.ranks.clear()


def oldest_first(partials: Iterable[Partial]) -> list[Partial]:
    return sorted(partials, key=lambda p: p.order)
