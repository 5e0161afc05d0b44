"""A pattern or sequence as the compiler builds it and both engines run it: an automaton of states.

`FROM PATTERN a -> b -> c` and `FROM SEQUENCE a, b, c` compile to a list of states, one per element
(a step, a counted step, an absence, or an AND/OR of two of these), in order; a partial match waits
at one state at a time (a counted step's, once it holds its minimum, also at the next one). Each alias
is a slot of the partial: the event its step took, or the events a counted step collected. A
condition reads the event being tested and values of the partial (`Ref`: `e1.price`,
`e2[last].price`), so it is an expression over one row: the event's fields, then those values. The
output of a match is the match row (the `Ref`s the SELECT and WHERE read, then the match time), over
which the WHERE and the projections are expressions like any other.

The semantics are docs/language.md's ("Patterns"), Siddhi's read in event time; the runtime that
both engines share is deployer.patterns.
"""

from __future__ import annotations

from dataclasses import dataclass

from operators.datatypes import DataType
from operators.declarations import format_ms
from operators.expr import Expr

PATTERN = "pattern"
SEQUENCE = "sequence"
AGGREGATES = ("count", "sum", "avg", "min", "max")


@dataclass(frozen=True)
class Slot:
    """An alias: the input (stream) its events come from, and whether it collects several."""

    alias: str
    input: int
    counted: bool = False


@dataclass(frozen=True)
class Ref:
    """A value read from a (partial) match: field `field` (named `name`) of the event slot `slot`
    holds; of one of the events it collected (`index` from the first, `from_last` from the last);
    or an aggregate (`agg`) over the field of all of them. An unbound slot, or an index out of
    range, reads NULL."""

    slot: int
    field: int
    name: str
    type: DataType
    index: int | None = None
    from_last: int | None = None
    agg: str | None = None  # one of AGGREGATES

    def to_cpl(self, alias: str) -> str:
        if self.agg is not None:
            return f"{self.agg}({alias}.{self.name})"
        if self.index is not None:
            return f"{alias}[{self.index}].{self.name}"
        if self.from_last is not None:
            last = "last" if self.from_last == 0 else f"last - {self.from_last}"
            return f"{alias}[{last}].{self.name}"
        return f"{alias}.{self.name}"


@dataclass(frozen=True)
class Condition:
    """A step's condition: `expr` over the tested event's fields, then the values of `refs`.

    `key`, when set, is an equality conjunct between a field of the event and a value the partial
    fixed before it reached this state (`idreceiver = e1.idreceiver`): (the event field's position,
    the ref's position in `refs`, the kind the two are compared as). The runtime indexes the
    partials waiting here by that value, so an event looks only at those it can fit.

    `rank`, when set (and no `key`), is a comparison conjunct of the same kind (`duration >
    e1.duration`) of exact values (integers, decimals, timestamps) in a condition that cannot fail:
    (the event field's position, the ref's position, the operator with the event's value on its
    left). The runtime keeps the partials waiting here sorted by that value, so an event looks only
    at those the comparison lets through."""

    expr: Expr
    refs: tuple[Ref, ...] = ()
    key: tuple[int, int, str] | None = None
    rank: tuple[int, int, str] | None = None


@dataclass(frozen=True)
class Step:
    """Events of its slot's input that fit `condition`: one (min = max = 1), or between `min` and
    `max` of them (`max` None: no bound)."""

    slot: int
    condition: Condition | None = None
    min: int = 1
    max: int | None = 1

    @property
    def counted(self) -> bool:
        return not (self.min == 1 and self.max == 1)


@dataclass(frozen=True)
class Absence:
    """No event of input `input` fitting `condition` for `wait_ms` (`NOT s[c] FOR d`); without a
    wait, before the other side of its AND (`NOT s[c] AND b`)."""

    input: int
    condition: Condition | None = None
    wait_ms: int | None = None


@dataclass(frozen=True)
class Logical:
    """Both sides in either order (`and`), or the first of either (`or`)."""

    op: str  # "and" | "or"
    left: Step | Absence
    right: Step | Absence


Element = Step | Absence | Logical


@dataclass(frozen=True)
class State:
    """One element of the automaton. `every`: when a partial completes this state, a copy of it
    without the slots from state `every` on waits again at state `every` (the start of the EVERY
    scope this state ends)."""

    element: Element
    every: int | None = None


@dataclass(frozen=True)
class Automaton:
    kind: str  # PATTERN (->) or SEQUENCE (,)
    states: tuple[State, ...]
    slots: tuple[Slot, ...]
    within_ms: int | None = None

    def describe(self, streams: tuple[str, ...]) -> list[str]:
        """One line per state, for explain: what it waits for, where it goes, what EVERY re-arms."""
        out = []
        for i, state in enumerate(self.states):
            nxt = f"-> s{i + 1}" if i + 1 < len(self.states) else "-> match"
            again = f"; EVERY: again at s{state.every}" if state.every is not None else ""
            out.append(f"s{i}: {self._element(state.element, streams)} {nxt}{again}")
        if self.within_ms is not None:
            out.append(f"WITHIN {format_ms(self.within_ms)}")
        return out

    def _element(self, e: Element, streams: tuple[str, ...]) -> str:
        if isinstance(e, Logical):
            return f"({self._element(e.left, streams)} {e.op.upper()} {self._element(e.right, streams)})"
        cond = f"[{e.condition.expr.to_cpl()}]" if e.condition is not None else ""
        if isinstance(e, Absence):
            wait = f" FOR {format_ms(e.wait_ms)}" if e.wait_ms is not None else ""
            return f"NOT {streams[e.input]}{cond}{wait}"
        slot = self.slots[e.slot]
        count = ""
        if e.counted:
            count = f"<{e.min}:{'' if e.max is None else e.max}>"
        c = e.condition
        indexed = " (indexed)" if c is not None and c.key is not None else ""
        indexed = " (ranked)" if c is not None and c.rank is not None else indexed
        return f"{slot.alias}={streams[slot.input]}{cond}{count}{indexed}"

    @property
    def unbounded(self) -> bool:
        """Whether the state can keep growing without WITHIN: an EVERY, or a count with no maximum."""
        if self.within_ms is not None:
            return False
        for state in self.states:
            if state.every is not None:
                return True
            steps = (
                [state.element.left, state.element.right]
                if isinstance(state.element, Logical)
                else [state.element]
            )
            if any(isinstance(s, Step) and s.max is None for s in steps):
                return True
        return False
