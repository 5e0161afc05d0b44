"""SELECT → named expressions, and the Map that computes them (left out when it would copy its
input unchanged)."""

from __future__ import annotations

from collections.abc import Sequence

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_state import Planned, PlanState
from cpl.scope import Scope
from cpl.typecheck import Checker
from operators import expr as ir
from operators import graph as g
from operators.datatypes import Schema


def select_items(sel: ast.Select, checker: Checker, star: Schema | None) -> list[g.NamedExpr]:
    """The SELECT list checked by `checker`; `*` stands for the fields of `star` (None: not allowed)."""
    out: list[g.NamedExpr] = []
    for item in sel.items:
        if item.expr is None:
            if star is None:
                raise PlanError("SELECT * is not allowed here; list the fields", item.pos)
            out.extend(g.NamedExpr(f.name, ir.Col(f.type, i, f.name)) for i, f in enumerate(star))
            continue
        value = checker.check(item.expr)
        name = item.alias
        if name is None:
            if isinstance(item.expr, ast.Name):
                name = item.expr.parts[-1]
            else:
                raise PlanError("this expression needs a name: add AS name", item.pos)
        out.append(g.NamedExpr(name, value))
    seen: set[str] = set()
    for ne, item in zip(out, _expanded(sel.items, star), strict=True):
        if ne.name.lower() in seen:
            raise PlanError(f"output field '{ne.name}' appears twice; rename one with AS", item.pos)
        seen.add(ne.name.lower())
    return out


def plan_map(
    state: PlanState, sel: ast.Select, cur: Planned, scope: Scope, line: int, keys: Sequence[g.NamedExpr] = ()
) -> Planned:
    """The Map of the SELECT; `keys`: columns appended after the SELECT's, for an OutputRate
    (cpl.plan_output.key_columns)."""
    items = select_items(sel, Checker(scope), cur.schema)
    event_time = _projected_time(items, cur.event_time)
    items += keys
    identity = len(items) == len(cur.schema) and all(
        isinstance(ne.expr, ir.Col) and ne.expr.index == i and ne.name == cur.schema.fields[i].name
        for i, ne in enumerate(items)
    )
    if identity:
        return cur
    node = g.Map(
        id=state.next_id(),
        line=line,
        inputs=(cur.port,),
        input_schema=cur.schema,
        projections=tuple(items),
        event_time=event_time,
    )
    port = state.add(node)
    return Planned(port, node.schema, event_time)


def _expanded(items: tuple[ast.SelectItem, ...], star: Schema | None) -> list[ast.SelectItem]:
    """The SELECT items with `*` repeated once per field it stands for, to point at in errors."""
    out: list[ast.SelectItem] = []
    for i in items:
        out.extend([i] * (len(star) if i.expr is None and star is not None else 1))
    return out


def _projected_time(items: list[g.NamedExpr], event_time: str | None) -> str | None:
    """The output name of the input's event-time field, if the SELECT keeps it."""
    if event_time is None:
        return None
    for ne in items:
        if isinstance(ne.expr, ir.Col) and ne.expr.name.lower() == event_time.lower():
            return ne.name
    return None
