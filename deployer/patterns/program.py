"""An automaton (operators.patterns) compiled for running: its conditions as Python closures over
(event, partial), the values a partial's refs read, and which states each input's events reach.

Conditions are the language's expressions, evaluated by the reference's evaluator
(deployer.evaluation): over one row, the tested event's fields followed by the values of the
condition's refs, read from the partial as it is before the event (`e2[last]` in e2's own condition
is the last event e2 collected so far, NULL before the first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from deployer.evaluation.aggregates import Aggregates
from deployer.evaluation.evaluate import compile_predicate
from deployer.patterns.partial import Partial
from operators import expr as ir
from operators import patterns as pt
from operators.datatypes import Schema
from operators.values import EvalError

Test = Callable[[tuple[Any, ...], Partial], bool]
Read = Callable[[Partial], Any]

STEP, ABSENCE, LOGICAL = "step", "absence", "logical"


def resolver(ref: pt.Ref, slots: Sequence[pt.Slot], schemas: Sequence[Schema]) -> Read:
    """How to read `ref` from a partial (see operators.patterns.Ref)."""
    slot, field = ref.slot, ref.field
    if ref.agg is not None:
        schema = schemas[slots[slot].input]
        col = ir.Col(schema.fields[field].type, field, schema.fields[field].name)
        agg = ir.Agg(ref.type, ref.agg, col)

        def column(_: ir.Expr) -> Callable[[Any], Any]:
            return lambda row: row[field]

        folding = Aggregates((agg,), column)

        def aggregate(p: Partial) -> Any:
            held = p.slots[slot]
            events = [] if held is None else held if isinstance(held, list) else [held]
            values, error = folding.result(folding.fold([folding.arguments(e) for e in events]))
            if error is not None:
                raise EvalError(error)
            return values[0]

        return aggregate
    if not slots[slot].counted:
        if (ref.index or 0) != 0 or (ref.from_last or 0) != 0:
            return lambda p: None  # e[1] of a step that takes one event: out of range
        return lambda p: None if (e := p.slots[slot]) is None else e[field]
    if ref.index is not None:
        i = ref.index
        return lambda p: e[i][field] if (e := p.slots[slot]) is not None and i < len(e) else None
    k = ref.from_last or 0
    return lambda p: e[-1 - k][field] if (e := p.slots[slot]) is not None and k < len(e) else None


def condition_test(cond: pt.Condition | None, reads: list[Read]) -> Test | None:
    """(event, partial) -> whether the event fits; None when the step has no condition."""
    if cond is None:
        return None
    pred = compile_predicate(cond.expr)
    if not reads:
        return lambda values, p: pred(values)
    if len(reads) == 1:
        r0 = reads[0]
        return lambda values, p: pred((*values, r0(p)))
    return lambda values, p: pred((*values, *[r(p) for r in reads]))


@dataclass
class StepCode:
    slot: int
    input: int
    min: int
    max: int | None
    test: Test | None
    event_key: Callable[[tuple[Any, ...]], Any] | None = None  # the event's value of the state's key
    partial_key: Read | None = None  # the partial's
    rank: str | None = None  # the key is a rank, compared by this operator (event's value on the left)

    @property
    def counted(self) -> bool:
        return not (self.min == 1 and self.max == 1)


@dataclass
class AbsenceCode:
    input: int
    test: Test | None
    wait_us: int | None


Side = StepCode | AbsenceCode


@dataclass
class StateCode:
    index: int
    kind: str  # STEP, ABSENCE or LOGICAL
    sides: tuple[Side, ...]  # one, or the two of an AND/OR
    op: str | None = None  # "and" | "or" for LOGICAL
    every: int | None = None

    @property
    def keyed(self) -> bool:
        """Whether the partials waiting here are indexed by the value of an equality (`Pending`)."""
        side = self.sides[0]
        return (
            self.kind == STEP and isinstance(side, StepCode) and side.event_key is not None and not side.rank
        )

    @property
    def rank(self) -> str | None:
        """The comparison the partials waiting here are sorted for (`Ranked`), if any."""
        side = self.sides[0]
        return side.rank if self.kind == STEP and isinstance(side, StepCode) else None


@dataclass
class Program:
    """The compiled automaton. `by_input[i]`: the (state, side) pairs events of input i reach, last
    state first (an event goes to the later states before the earlier ones, so that a partial it
    moves on is not tried again at its new state by the same event)."""

    automaton: pt.Automaton
    states: list[StateCode]
    by_input: list[list[tuple[int, int]]]
    within_us: int | None
    sequence: bool

    @property
    def last(self) -> int:
        return len(self.states) - 1


def _key(cond: pt.Condition, reads: list[Read]) -> tuple[Callable[[tuple[Any, ...]], Any], Read] | None:
    if cond.key is None:
        return None
    field, ref, how = cond.key
    read = reads[ref]
    if how == "double":
        return (
            lambda values: None if (v := values[field]) is None else float(v),
            lambda p: None if (v := read(p)) is None else float(v),
        )
    return (lambda values: values[field]), read


def _side(element: pt.Step | pt.Absence, a: pt.Automaton, schemas: Sequence[Schema]) -> Side:
    cond = element.condition
    reads = [resolver(r, a.slots, schemas) for r in cond.refs] if cond is not None else []
    test = condition_test(cond, reads)
    if isinstance(element, pt.Absence):
        wait = None if element.wait_ms is None else element.wait_ms * 1000
        return AbsenceCode(element.input, test, wait)
    code = StepCode(element.slot, a.slots[element.slot].input, element.min, element.max, test)
    keyed = _key(cond, reads) if cond is not None else None
    if keyed is not None:
        code.event_key, code.partial_key = keyed
    elif cond is not None and cond.rank is not None:
        field, ref, code.rank = cond.rank
        code.event_key, code.partial_key = (lambda values: values[field]), reads[ref]
    return code


def compile_program(a: pt.Automaton, schemas: Sequence[Schema]) -> Program:
    states: list[StateCode] = []
    for i, state in enumerate(a.states):
        e = state.element
        if isinstance(e, pt.Logical):
            sides = (_side(e.left, a, schemas), _side(e.right, a, schemas))
            states.append(StateCode(i, LOGICAL, sides, e.op, state.every))
        else:
            kind = ABSENCE if isinstance(e, pt.Absence) else STEP
            states.append(StateCode(i, kind, (_side(e, a, schemas),), None, state.every))
    by_input: list[list[tuple[int, int]]] = [[] for _ in schemas]
    for st in reversed(states):
        for k, side in enumerate(st.sides):
            by_input[side.input].append((st.index, k))
    within = None if a.within_ms is None else a.within_ms * 1000
    return Program(a, states, by_input, within, a.kind == pt.SEQUENCE)


def match_row(
    refs: Sequence[pt.Ref], a: pt.Automaton, schemas: Sequence[Schema]
) -> Callable[[Partial], tuple[Any, ...]]:
    """The values of a match's refs (the match row without its time)."""
    reads = [resolver(r, a.slots, schemas) for r in refs]
    return lambda p: tuple(r(p) for r in reads)
