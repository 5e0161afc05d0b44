"""A statement that reads two streams, each through a TIME window: one Join node, its WHERE the join
condition, its SELECT computed over each matching (left, right) pair."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_map import select_items
from cpl.plan_output import check_output, key_columns, plan_output
from cpl.plan_state import Planned, PlanState, Stream, qualifiers
from cpl.plan_windows import resolve_window
from cpl.scope import Input, Scope
from cpl.typecheck import Checker
from operators import expr as ir
from operators import graph as g
from operators.output_node import OutputRate


def plan_join(state: PlanState, sel: ast.Select, streams: list[Stream], line: int) -> Planned:
    left_item, right_item = sel.sources
    left, right = streams
    lq, rq = qualifiers(left_item), qualifiers(right_item)
    # A self-join (FROM s AS a ..., s AS b ...): the stream's own name would name both sides, so
    # on an aliased side only the alias does.
    common = lq & rq
    aliases = {a.lower() for a in (left_item.alias, right_item.alias) if a}
    lq, rq = (lq - common if left_item.alias else lq), (rq - common if right_item.alias else rq)
    if common & aliases or lq & rq:
        raise PlanError(
            "both sides of the join have the same name; give one an alias: FROM s AS a ..., s AS b ...",
            right_item.pos,
        )
    scope = Scope([Input(left.schema, lq, 0), Input(right.schema, rq, 1)])
    left_window, right_window = _time_windows(state, sel, streams)
    if sel.on_sql is not None:
        raise PlanError(
            "ON SQL cannot be used in a join; enrich the joined stream in a following statement",
            sel.on_sql.pos,
        )
    if sel.group_by or sel.having is not None:
        raise PlanError("a join cannot GROUP BY; aggregate its output in a following statement", sel.pos)
    predicate: ir.Expr = ir.Lit(ir.T_BOOLEAN, True)
    checker = Checker(scope)
    if sel.where is not None:
        predicate = checker.check_bool(sel.where, "the join condition")
    items = _join_projections(sel, checker, left, right)
    event_time = _joined_time(items, left)
    ordered = sel.output is not None and OutputRate.needs_time_order(sel.output.kind, sel.output.events)
    if ordered:  # the pair's time, its left event's, by which the limit takes the pairs in time order
        assert left.event_time is not None  # a TIME window's input has it (_time_windows)
        i = left.schema.position(left.event_time)
        items += key_columns([], ir.Col(left.schema.fields[i].type, i, left.event_time))
    node = g.Join(
        id=state.next_id(),
        line=line,
        inputs=(left.port, right.port),
        left_schema=left.schema,
        right_schema=right.schema,
        left_window=left_window,
        right_window=right_window,
        left_time=left.event_time or "",
        right_time=right.event_time or "",
        predicate=predicate,
        projections=tuple(items),
        event_time=event_time,
    )
    port = state.add(node)
    fix = "select the left stream's event-time field (a join's output time), or limit by EVENTS"
    check_output(sel, aggregate=False, event_time=event_time, what="the join's output", fix=fix)
    # a pair comes when its later event arrives: out of time order on Spark (cpl.plan_order)
    return plan_output(state, sel, Planned(port, node.schema, event_time), line, out_of_order=ordered)


def _time_windows(state: PlanState, sel: ast.Select, streams: list[Stream]) -> tuple[g.Window, g.Window]:
    """The windows of both inputs, which must be TIME windows over streams with event time."""
    windows = []
    for item, s in zip(sel.sources, streams, strict=True):
        w = resolve_window(state, item, Scope([Input(s.schema, qualifiers(item))]))
        if w.kind != "time":
            raise PlanError(
                f"a join needs TIME windows on both inputs, to be deterministic; '{s.name}' has a {w.kind.upper()} window",
                item.window_pos,
            )
        if s.event_time is None:
            raise PlanError(
                f"a join needs event time: declare '{s.name}' with TIMESTAMP BY <field>", item.pos
            )
        windows.append(w)
    return windows[0], windows[1]


def _join_projections(sel: ast.Select, checker: Checker, left: Stream, right: Stream) -> list[g.NamedExpr]:
    """The SELECT over a pair; `*` is every field of the left input, then every field of the right."""
    star: list[g.NamedExpr] = []
    for side, s in enumerate((left, right)):
        star.extend(g.NamedExpr(f.name, ir.Col(f.type, i, f.name, side)) for i, f in enumerate(s.schema))
    items: list[g.NamedExpr] = []
    for sel_item in sel.items:
        if sel_item.expr is None:
            items.extend(star)
            continue
        items.extend(select_items(ast.Select((sel_item,), sel.sources), checker, None))
    seen: dict[str, int] = {}
    for ne in items:
        if ne.name.lower() in seen:
            raise PlanError(
                f"output field '{ne.name}' appears twice (both inputs have it?); select one side with AS",
                sel.items[0].pos,
            )
        seen[ne.name.lower()] = 1
    return items


def _joined_time(items: list[g.NamedExpr], left: Stream) -> str | None:
    """The event time of the output: the last output field that is the left input's event time."""
    event_time = None
    for ne in items:
        if isinstance(ne.expr, ir.Col) and ne.expr.side == 0 and ne.expr.name == left.event_time:
            event_time = ne.name
    return event_time
