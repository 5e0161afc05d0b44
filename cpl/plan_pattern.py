"""FROM PATTERN / FROM SEQUENCE → a Pattern node: the elements flattened into the automaton's states
(EVERY marking where each scope starts again), every alias a slot, each condition checked over its
event and the aliases before it, the SELECT and WHERE over the match row (docs/language.md,
"Patterns"); then its OUTPUT clause, if it has one."""

from __future__ import annotations

from dataclasses import dataclass, field

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.pattern_check import Alias, PatternChecker, place_match_time
from cpl.plan_map import select_items
from cpl.plan_order import unordered
from cpl.plan_output import check_output, key_columns, plan_output
from cpl.plan_state import Planned, PlanState, SkipStatement, Stream
from cpl.plan_windows import duration_ms
from cpl.scope import Input, Scope
from operators import expr as ir
from operators import graph as g
from operators import patterns as pt
from operators.analysis import can_fail
from operators.datatypes import T_TIMESTAMP, Schema

_QUANTIFIERS = {"+": (1, None), "*": (0, None), "?": (0, 1)}
_SEPARATOR = {pt.PATTERN: "->", pt.SEQUENCE: ","}


@dataclass
class _Flat:
    """The pattern's elements in order, and where each EVERY scope ends: end state -> start state."""

    elements: list[ast.PatternStep | ast.PatternAbsence | ast.PatternLogical] = field(default_factory=list)
    every: dict[int, int] = field(default_factory=dict)


def _flatten(group: ast.PatternGroup, kind: str, out: _Flat, in_every: bool) -> None:
    want = _SEPARATOR[kind]
    for i, sep in enumerate(group.separators):
        if sep != want:
            pos = group.separator_pos[i] if i < len(group.separator_pos) else group.pos
            other = "SEQUENCE" if kind == pt.PATTERN else "PATTERN"
            raise PlanError(
                f"'{sep}' between the steps of a {kind.upper()}: write {want} ('{sep}' is a {other}'s)", pos
            )
    for item in group.items:
        if isinstance(item, ast.PatternEvery):
            if in_every:
                raise PlanError("EVERY inside EVERY: an EVERY scope cannot hold another", item.pos)
            start = len(out.elements)
            body = item.body
            if isinstance(body, ast.PatternGroup):
                _flatten(body, kind, out, True)
            else:
                _flatten(ast.PatternGroup((body,)), kind, out, True)
            out.every[len(out.elements) - 1] = start
        elif isinstance(item, ast.PatternGroup):
            _flatten(item, kind, out, in_every)
        else:
            out.elements.append(item)


class _Planner:
    """One pattern statement being planned."""

    def __init__(self, state: PlanState, sel: ast.Select, pf: ast.PatternFrom) -> None:
        self.state = state
        self.sel = sel
        self.pf = pf
        self.kind = pf.kind
        self.flat = _Flat()
        _flatten(pf.body, self.kind, self.flat, False)
        self.streams: list[Stream] = []  # the inputs, in the order they first appear
        self.aliases: dict[str, Alias] = {}
        self.slots: list[pt.Slot] = []

    def input(self, name: str, pos: ast.Pos) -> int:
        s = self.state.streams.get(name.lower())
        if s is None:
            if name.lower() in self.state.failed:
                raise SkipStatement()
            raise PlanError(
                f"unknown stream '{name}'; declare it with CREATE STREAMSCHEMA or produce it in an earlier statement",
                pos,
            )
        if s.event_time is None:
            raise PlanError(
                f"a pattern matches events in event time: stream '{s.name}' has none "
                "(declare TIMESTAMP BY, or keep the event time in the statement that makes it)",
                pos,
            )
        for i, known in enumerate(self.streams):
            if known.name.lower() == s.name.lower():
                return i
        self.streams.append(s)
        return len(self.streams) - 1

    def declare_aliases(self) -> None:
        for state, e in enumerate(self.flat.elements):
            for step in _steps(e):
                key = step.alias.lower()
                if key in self.aliases:
                    raise PlanError(
                        f"alias '{step.alias}' names two steps; give each step its own (Siddhi reads the "
                        "first step's value for both, CPL refuses it)",
                        step.alias_pos,
                    )
                inp = self.input(step.stream, step.stream_pos)
                lo, hi = self.count(step)
                counted = not (lo == 1 and hi == 1)
                self.aliases[key] = Alias(
                    step.alias, len(self.slots), self.streams[inp].schema, counted, state
                )
                self.slots.append(pt.Slot(step.alias, inp, counted))

    def count(self, step: ast.PatternStep) -> tuple[int, int | None]:
        if step.quantifier is not None:
            if self.kind == pt.PATTERN:
                lo, hi = _QUANTIFIERS[step.quantifier]
                written = f"<{lo}:{'' if hi is None else hi}>"
                raise PlanError(
                    f"'{step.quantifier}' is for sequences (Siddhi's too); in a PATTERN write {written}",
                    step.pos,
                )
            return _QUANTIFIERS[step.quantifier]
        if step.count is None:
            return 1, 1
        lo, hi = step.count
        if hi is not None and (hi < 1 or hi < lo):
            raise PlanError(f"a count <{lo}:{hi}> needs a maximum of at least 1 and of its minimum", step.pos)
        return lo, hi

    def scope(self, schema: Schema, names: set[str]) -> Scope:
        return Scope([Input(schema, frozenset(names))])

    def condition(
        self, where: ast.Expr | None, inp: int, own: str | None, state: int, what: str
    ) -> pt.Condition | None:
        if where is None:
            return None
        s = self.streams[inp]
        names = {s.name.lower()} | ({own.lower()} if own else set())
        usable = {k for k, a in self.aliases.items() if a.state < state}
        checker = PatternChecker(self.scope(s.schema, names), self.aliases, usable, own, len(s.schema), what)
        expr = checker.check_bool(where, what)
        key = _key(expr, checker.refs, len(s.schema), state, self)
        rank = None if key is not None else _rank(expr, checker.refs, len(s.schema), state, self)
        return pt.Condition(expr, tuple(checker.refs), key, rank)

    def side(self, e: ast.PatternStep | ast.PatternAbsence, state: int) -> pt.Step | pt.Absence:
        if isinstance(e, ast.PatternAbsence):
            inp = self.input(e.stream, e.stream_pos)
            wait = duration_ms(e.wait) if e.wait is not None else None
            cond = self.condition(e.condition, inp, None, state, "an absence's condition")
            return pt.Absence(inp, cond, wait)
        a = self.aliases[e.alias.lower()]
        inp = self.slots[a.slot].input
        cond = self.condition(e.condition, inp, e.alias, state, "a step's condition")
        lo, hi = self.count(e)
        return pt.Step(a.slot, cond, lo, hi)

    def automaton(self) -> pt.Automaton:
        states = []
        for i, e in enumerate(self.flat.elements):
            element: pt.Element
            if isinstance(e, ast.PatternLogical):
                element = pt.Logical(e.op, self.side(e.left, i), self.side(e.right, i))
            else:
                if isinstance(e, ast.PatternAbsence) and e.wait is None:
                    raise PlanError(
                        "NOT s[...] without FOR stands only beside a step: NOT s[...] AND e=t[...]", e.pos
                    )
                element = self.side(e, i)
            states.append(pt.State(element, self.flat.every.get(i)))
        if all(isinstance(st.element, pt.Step) and st.element.min == 0 for st in states):
            raise PlanError(
                "every element of this pattern can match no event (a count with a minimum of 0, '*' or "
                "'?'): it would match at its first event, whatever that event is; give one step a "
                "minimum of at least 1",
                self.pf.pos,
            )
        within = duration_ms(self.pf.within) if self.pf.within is not None else None
        return pt.Automaton(self.kind, tuple(states), tuple(self.slots), within)


def _steps(e: ast.PatternStep | ast.PatternAbsence | ast.PatternLogical) -> list[ast.PatternStep]:
    if isinstance(e, ast.PatternLogical):
        return [s for s in (e.left, e.right) if isinstance(s, ast.PatternStep)]
    return [e] if isinstance(e, ast.PatternStep) else []


def _key(
    expr: ir.Expr, refs: list[pt.Ref], width: int, state: int, p: _Planner
) -> tuple[int, int, str] | None:
    """The conjunct `event field = value the partial fixed earlier` the runtime may index the partials
    waiting at this state by; only when no conjunct before it can fail (every partial would
    evaluate that one, and fail alike, with or without the index)."""
    for conj in ir.conjuncts(expr):
        if isinstance(conj, ir.Binary) and conj.op == "=":
            pair = (conj.left, conj.right)
            for ev, rf in (pair, pair[::-1]):
                if isinstance(ev, ir.Col) and isinstance(rf, ir.Col) and ev.index < width <= rf.index:
                    ref = refs[rf.index - width]
                    if _fixed(ref, state, p):
                        double = "double" in (ev.type.kind, rf.type.kind)
                        return ev.index, rf.index - width, "double" if double else "exact"
        if can_fail(conj):
            return None
    return None


_EXACT = ("integer", "bigint", "decimal")
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _rank(
    expr: ir.Expr, refs: list[pt.Ref], width: int, state: int, p: _Planner
) -> tuple[int, int, str] | None:
    """The conjunct `event field < value the partial fixed earlier` (or <=, >, >=) the runtime may
    keep the partials waiting at this state sorted by: exact values only (Python orders them as the
    conditions compare them; a double's NaN would not be), and only in a condition none of whose
    conjuncts can fail (a partial the order rules out is not evaluated at all: an error it would have
    raised must not be one that refuses the event)."""
    parts = ir.conjuncts(expr)
    if any(can_fail(c) for c in parts):
        return None
    for conj in parts:
        if not (isinstance(conj, ir.Binary) and conj.op in _FLIPPED):
            continue
        for ev, rf, op in ((conj.left, conj.right, conj.op), (conj.right, conj.left, _FLIPPED[conj.op])):
            if not (isinstance(ev, ir.Col) and isinstance(rf, ir.Col) and ev.index < width <= rf.index):
                continue
            kinds = {ev.type.kind, rf.type.kind}
            if (kinds <= set(_EXACT) or kinds == {"timestamp"}) and _fixed(refs[rf.index - width], state, p):
                return ev.index, rf.index - width, op
    return None


def _fixed(ref: pt.Ref, state: int, p: _Planner) -> bool:
    """Whether the partial's value of `ref` cannot change while it waits at `state`: one event's
    field, of a step before it that no longer collects (a counted step just before it does)."""
    if ref.agg is not None:
        return False
    a = next(x for x in p.aliases.values() if x.slot == ref.slot)
    if a.state >= state:
        return False
    return not (a.counted and a.state == state - 1)


def _partition(p: _Planner) -> tuple[int, ...] | None:
    names = p.pf.partition
    if not names:
        return None
    out: list[int | None] = [None] * len(p.streams)
    for n in names:
        if len(n.parts) == 1 and len(names) == 1:
            for i, s in enumerate(p.streams):
                f = s.schema.get(n.parts[0])
                if f is None:
                    raise PlanError(f"PARTITION BY {n.parts[0]}: stream '{s.name}' has no such field", n.pos)
                out[i] = s.schema.position(f.name)
            continue
        if len(n.parts) != 2:
            raise PlanError("PARTITION BY one field, or one stream.field per stream of the pattern", n.pos)
        hits = [i for i, s in enumerate(p.streams) if s.name.lower() == n.parts[0].lower()]
        if not hits:
            raise PlanError(
                f"PARTITION BY {n.parts[0]}.{n.parts[1]}: '{n.parts[0]}' is no stream of the pattern", n.pos
            )
        s = p.streams[hits[0]]
        f = s.schema.get(n.parts[1])
        if f is None:
            raise PlanError(f"stream '{s.name}' has no field '{n.parts[1]}'", n.pos)
        out[hits[0]] = s.schema.position(f.name)
    missing = [s.name for s, i in zip(p.streams, out, strict=True) if i is None]
    if missing:
        raise PlanError(
            f"PARTITION BY names no field of stream {', '.join(missing)}: name one per stream", names[0].pos
        )
    kinds = {p.streams[i].schema.fields[f].type.kind for i, f in enumerate(out) if f is not None}
    if len(kinds - {"integer", "bigint"}) > 1 or (kinds - {"integer", "bigint"} and len(kinds) > 1):
        raise PlanError(f"the partition keys have different types ({', '.join(sorted(kinds))})", names[0].pos)
    return tuple(i for i in out if i is not None)


def plan_pattern(state: PlanState, sel: ast.Select, line: int) -> Planned:
    pf = sel.pattern
    assert pf is not None
    for what, present, pos in (
        ("GROUP BY", bool(sel.group_by) and sel.output is None, sel.pos),
        ("HAVING", sel.having is not None, sel.pos),
        ("ON SQL", sel.on_sql is not None, sel.on_sql.pos if sel.on_sql else sel.pos),
    ):
        if present:
            raise PlanError(
                f"a pattern statement has no {what}: apply it to its output in a statement of its own", pos
            )
    p = _Planner(state, sel, pf)
    p.declare_aliases()
    automaton = p.automaton()
    partition = _partition(p)
    checker = PatternChecker(Scope([]), p.aliases, set(p.aliases), None, 0, "the SELECT")
    items = select_items(sel, checker, None)
    keys = [checker.check(k) for k in sel.group_by]  # with an OUTPUT clause only (above)
    where = checker.check_bool(sel.where, "WHERE") if sel.where is not None else None
    width = len(checker.refs)
    items = [g.NamedExpr(ne.name, place_match_time(ne.expr, width)) for ne in items]
    where = place_match_time(where, width) if where is not None else None
    timed = next(
        (ne.name for ne in items if isinstance(ne.expr, ir.Col) and ne.expr.name == g.MATCH_TIME), None
    )
    # a match always has a time (the limiter reads it whether the SELECT shows it or not)
    check_output(sel, aggregate=False, event_time=g.MATCH_TIME, what="the pattern")
    if sel.output is not None:  # the keys, then the match time (the limiter's order and ticks)
        match_time = place_match_time(ir.Col(T_TIMESTAMP, -1, g.MATCH_TIME), width)
        items += key_columns([place_match_time(k, width) for k in keys], match_time)
    if automaton.unbounded:
        state.warnings.append(
            (
                "this pattern can keep partial matches without bound (EVERY, or a count with no maximum, "
                "and no WITHIN): give it a WITHIN; beyond CEP_PATTERN_MAX_PARTIALS per key the oldest are "
                "dropped and dead-lettered",
                pf.pos,
            )
        )
    node = g.Pattern(
        id=state.next_id(),
        line=line,
        inputs=tuple(s.port for s in p.streams),
        event_time=timed,
        streams=tuple(s.name for s in p.streams),
        input_schemas=tuple(s.schema for s in p.streams),
        input_times=tuple(s.event_time or "" for s in p.streams),
        automaton=automaton,
        partition=partition,
        row=tuple(checker.refs),
        where=where,
        projections=tuple(items),
        in_time_order=any(unordered(state, s.port) is not None for s in p.streams),
    )
    port = state.add(node)
    return plan_output(
        state, sel, Planned(port, node.schema, timed), line, out_of_order=partition is not None
    )
