"""A statement without windows: its inputs (one stream, or the Union of several), then WHERE and
ON SQL, then the Map of its SELECT, then its OUTPUT clause. Aggregates and HAVING are refused: they
need a window; so is GROUP BY, except with an OUTPUT clause, which then limits per group."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.aggregate_check import contains_aggregate
from cpl.errors import PlanError
from cpl.plan_filter import plan_where_and_sql
from cpl.plan_map import plan_map
from cpl.plan_order import unordered
from cpl.plan_output import check_output, key_columns, plan_output
from cpl.plan_state import Planned, PlanState, Stream, qualifiers
from cpl.scope import Input, Scope
from cpl.typecheck import Checker
from operators import expr as ir
from operators import graph as g


def plan_stateless(state: PlanState, sel: ast.Select, streams: list[Stream], line: int) -> Planned:
    if len(streams) > 1:
        cur = _plan_union(state, sel, streams, line)
        quals: frozenset[str] = frozenset().union(*(qualifiers(i) for i in sel.sources))
    else:
        first = streams[0]
        cur = Planned(first.port, first.schema, first.event_time)
        quals = qualifiers(sel.sources[0])
    scope = Scope([Input(cur.schema, quals)])
    cur, scope = plan_where_and_sql(state, sel, cur, scope, line)
    if sel.having is not None or any(
        i.expr is not None and contains_aggregate(i.expr) for i in (*sel.items, *_keys(sel))
    ):
        pos = sel.group_by[0].pos if sel.group_by else sel.pos  # type: ignore[attr-defined]
        raise PlanError(
            "aggregates, GROUP BY and HAVING need a window: FROM stream WINDOW name (or WINDOW TUPLE SIZE n ...)",
            pos,
        )
    if sel.group_by and sel.output is None:
        # without a window, GROUP BY only says what an OUTPUT clause counts and keeps rows per
        # (Siddhi's rule); it aggregates nothing
        raise PlanError(
            "GROUP BY needs a window (FROM stream WINDOW name, or WINDOW TUPLE SIZE n ...) to aggregate, "
            "or an OUTPUT clause, whose limit it then applies per group",
            sel.group_by[0].pos,  # type: ignore[attr-defined]
        )
    what = f"stream '{streams[0].name}'" if len(streams) == 1 else "the merge of its streams"
    check_output(sel, aggregate=False, event_time=cur.event_time, what=what)
    keys = [Checker(scope).check(k) for k in sel.group_by]
    time = None
    if sel.output is not None and cur.event_time is not None:
        i = cur.schema.position(cur.event_time)
        time = ir.Col(cur.schema.fields[i].type, i, cur.event_time)
    tip = plan_map(state, sel, cur, scope, line, key_columns(keys, time))
    # a limit by count or FIRST over rows out of time order (a pattern's partitions, a join's pairs)
    # waits for them in time order
    return plan_output(state, sel, tip, line, out_of_order=unordered(state, cur.port) is not None)


def _keys(sel: ast.Select) -> list[ast.SelectItem]:
    """The GROUP BY keys as items, to look for aggregates in them as in the SELECT."""
    return [ast.SelectItem(k) for k in sel.group_by]


def _plan_union(state: PlanState, sel: ast.Select, streams: list[Stream], line: int) -> Planned:
    """FROM a, b, ...: the Union of streams of one shape; it keeps their event time if they agree."""
    first = streams[0]
    for item, s in zip(sel.sources[1:], streams[1:], strict=True):
        if not first.schema.same_shape(s.schema):
            raise PlanError(
                f"Union needs identical schemas: '{first.name}' is {first.schema} but '{s.name}' is {s.schema}",
                item.pos,
            )
    same_time = {s.event_time.lower() if s.event_time else None for s in streams}
    event_time = first.event_time if len(same_time) == 1 else None
    port = state.add(
        g.Union(
            id=state.next_id(),
            line=line,
            inputs=tuple(s.port for s in streams),
            input_schema=first.schema,
            event_time=event_time,
        )
    )
    return Planned(port, first.schema, event_time)
