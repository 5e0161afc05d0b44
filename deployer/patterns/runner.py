"""A Pattern node's meaning over events, the part both engines share around the automaton: one
`Matcher` per partition key, and what becomes of what they report — a match's row (its refs and
match time, kept by the WHERE, projected by the SELECT) or a dead letter (an event a condition failed
on, a match row whose WHERE or SELECT failed, a partial dropped beyond the cap).

Rows carry an order key: the match time, then (at equal times) the matches a deadline completed
before those an event completed, then the completing event's place in the merged order (its input's
place in the pattern, then its arrival), or for a deadline's matches the partition key (as text) and
the partial's age. Each engine sorts what it writes by it, so that the rows of one partition key
come in the order they were matched, and the deadlines' matches of several keys at one time in one
order on both engines (an OutputRate after the pattern counts them in it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from deployer.evaluation.evaluate import EVAL_ERRORS, compile_expr, compile_predicate
from deployer.patterns.matcher import Dropped, KeyState, Match, Matcher
from deployer.patterns.program import compile_program, match_row
from operators import graph as g
from operators.values import from_micros

Values = tuple[Any, ...]

# Added to a time (µs) so that every time of years 1 to 9999 writes as 19 digits that sort as it.
_TIME_OFFSET = 2**62


def time_key(t: int) -> str:
    return f"{t + _TIME_OFFSET:019d}"


def key_text(key: Any) -> str:
    """A partition key in an order key: the same text for one value on both engines (their events'
    values are alike: deployer.spark.patterns.processor converts timestamps as the reference has
    them); a Decimal without its trailing zeros, as `1.0` and `1.00` are one key. NULL is "", any
    value starts with "=", so that the empty string is another key's text."""
    if key is None:
        return ""
    return f"={key.normalize() if isinstance(key, Decimal) else key}"


@dataclass(frozen=True)
class Emit:
    """A match's output row, at its match time (µs), with its place in the order (module docstring)."""

    values: Values
    time: int
    order: str


@dataclass(frozen=True)
class Fail:
    """A dead letter of the Pattern: why, and the event it is about (of input `input`), or the match
    row (`input` None), if any."""

    reason: str
    event: Values | None
    input: int | None = None


class PatternRunner:
    """The compiled Pattern node (see the module docstring); `cap`: the most open partial matches a
    key may hold (CEP_PATTERN_MAX_PARTIALS), None for no cap."""

    def __init__(self, node: g.Pattern, cap: int | None) -> None:
        self.node = node
        self.cap = cap
        self.program = compile_program(node.automaton, node.input_schemas)
        self.row = match_row(node.row, node.automaton, node.input_schemas)
        self.where = compile_predicate(node.where) if node.where is not None else None
        self.project = [compile_expr(p.expr) for p in node.projections]
        self.partition = node.partition

    def key(self, inp: int, values: Values) -> Any:
        """The partition key of an event of input `inp` (None for a pattern without PARTITION BY)."""
        return None if self.partition is None else values[self.partition[inp]]

    def new_state(self) -> KeyState:
        return KeyState(self.program)

    def matcher(self, state: KeyState) -> Matcher:
        return Matcher(self.program, state, self.cap)

    def on_event(self, m: Matcher, inp: int, values: Values, t: int, seq: str) -> list[Emit | Fail]:
        if self.partition is not None and not m.s.key:
            m.s.key = key_text(self.key(inp, values))
        happened, refused = m.event(inp, values, t)
        # at equal times, the merged order: the input's place in the pattern, then arrival
        out = self.outcome(happened, f"{inp:03d}|{seq}", m.s.key)
        if refused is not None:
            out.append(Fail(refused, values, inp))
        return out

    def on_time(self, m: Matcher, until: int) -> list[Emit | Fail]:
        return self.outcome(m.advance(until), "", m.s.key)

    def outcome(self, happened: Sequence[Match | Dropped], seq: str, key: str) -> list[Emit | Fail]:
        """`key`: the partition key's text, in the order key of a deadline's matches."""
        out: list[Emit | Fail] = []
        n = 0
        for h in happened:
            if isinstance(h, Dropped):
                out.append(self._dropped(h))
                continue
            if h.by_event:
                order = f"{time_key(h.time)}|1|{seq}|{n:06d}"
                n += 1
            else:  # a deadline's: by key, as another key's at that time may come first on Spark
                order = f"{time_key(h.time)}|0|{key}|{h.partial.order:012d}"
            made = self._row(h, order)
            if made is not None:
                out.append(made)
        return out

    def _row(self, m: Match, order: str) -> Emit | Fail | None:
        """The match's row, or its dead letter; None when the WHERE drops it."""
        row: Values = ()
        try:
            row = (*self.row(m.partial), from_micros(m.time))
            if self.where is not None and not self.where(row):
                return None
            return Emit(tuple(p(row) for p in self.project), m.time, order)
        except EVAL_ERRORS as err:
            return Fail(str(err) or type(err).__name__, row or None)

    def _dropped(self, d: Dropped) -> Fail:
        """The dead letter of a partial dropped beyond the cap: its first event, if it has one."""
        reason = (
            f"pattern: a partition key holds more than {self.cap} open partial matches "
            "(CEP_PATTERN_MAX_PARTIALS); the oldest, which this event began, is dropped"
        )
        for slot, held in zip(self.node.automaton.slots, d.partial.slots, strict=True):
            first = held[0] if isinstance(held, list) and held else held
            if isinstance(first, tuple):
                return Fail(reason, first, slot.input)
        return Fail(reason, None)
