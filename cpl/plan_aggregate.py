"""A statement that reads one stream through a WINDOW: WHERE and ON SQL, then one Aggregate node
that groups, aggregates, applies HAVING and computes the SELECT over the aggregated row; then its
OUTPUT clause, if it has one."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.aggregate_check import AggregateChecker, agg_name, contains_aggregate, place_window_bounds
from cpl.errors import PlanError
from cpl.plan_filter import plan_where_and_sql
from cpl.plan_map import select_items
from cpl.plan_order import read_in_time_order
from cpl.plan_output import check_output, key_columns, plan_output
from cpl.plan_state import Planned, PlanState, Stream, qualifiers
from cpl.plan_windows import resolve_window
from cpl.scope import Input, Scope
from cpl.typecheck import Checker
from operators import expr as ir
from operators import graph as g


def plan_aggregate(state: PlanState, sel: ast.Select, stream: Stream, line: int) -> Planned:
    item = sel.sources[0]
    cur = Planned(stream.port, stream.schema, stream.event_time)
    scope = Scope([Input(cur.schema, qualifiers(item))])
    window = resolve_window(state, item, scope)
    if window.kind != "time":  # it counts rows in the order they come
        stream = read_in_time_order(state, stream, item.pos, f"a {window.kind.upper()} window")
        cur = Planned(stream.port, stream.schema, stream.event_time)
    if window.kind == "time" and stream.event_time is None:
        fix = (
            f"declare '{stream.name}' with TIMESTAMP BY <field>"
            if stream.is_source
            else f"'{stream.name}' is filled by INSERT INTO at line {stream.line}, whose output has none "
            "(it has one when its SELECT keeps its input's event-time field, with no window and no "
            "OUTPUT ALL, LAST or SNAPSHOT on the way, nor OUTPUT FIRST after a pattern "
            "with PARTITION BY or a join, nor a TUPLE or BATCH window over such rows)"
        )
        raise PlanError(f"a TIME window needs event time: {fix}", item.window_pos)
    cur, scope = plan_where_and_sql(state, sel, cur, scope, line)
    if window.kind == "batch":  # its conditions read the events reaching the Aggregate
        window = resolve_window(state, item, scope)
    keys, key_names = _group_keys(sel, Checker(scope))
    checker = AggregateChecker(scope, keys, key_names, window.kind)
    items = select_items(sel, checker, None)
    having = checker.check_bool(sel.having, "HAVING") if sel.having is not None else None
    width = len(keys) + len(checker.aggs)
    items = [g.NamedExpr(i.name, place_window_bounds(i.expr, width)) for i in items]
    having = place_window_bounds(having, width) if having is not None else None
    if not checker.aggs:
        raise PlanError(
            "a statement that reads a stream WINDOW must compute aggregates (count, sum, avg, min, max)",
            item.window_pos,
        )
    check_output(sel, aggregate=True, event_time=stream.event_time, what=f"stream '{stream.name}'")
    if sel.output is not None:  # the key values, for the limiter (they need not be in the SELECT)
        items += key_columns(
            [ir.Col(k.type, i, n) for i, (k, n) in enumerate(zip(keys, key_names, strict=True))]
        )
    node = g.Aggregate(
        id=state.next_id(),
        line=line,
        inputs=(cur.port,),
        input_schema=cur.schema,
        window=window,
        keys=tuple(g.NamedExpr(n, k) for n, k in zip(key_names, keys, strict=True)),
        aggs=tuple(g.NamedExpr(agg_name(i), a) for i, a in enumerate(checker.aggs)),
        having=having,
        projections=tuple(items),
    )
    port = state.add(node)
    # a snapshot's current rows over a TIME window are those of the latest window that has ended
    current = (window.size, window.advance) if window.kind == "time" else None
    return plan_output(state, sel, Planned(port, node.schema, None), line, current)


def _group_keys(sel: ast.Select, plain: Checker) -> tuple[list[ir.Expr], list[str]]:
    """The GROUP BY expressions and their names in the aggregated row: a field keeps its name, any
    other expression is keyN, and a name met twice gets the key's number appended."""
    keys: list[ir.Expr] = []
    key_names: list[str] = []
    for k in sel.group_by:
        if contains_aggregate(k):
            raise PlanError("GROUP BY cannot hold aggregate functions", k.pos)  # type: ignore[attr-defined]
        value = plain.check(k)
        keys.append(value)
        base = k.parts[-1] if isinstance(k, ast.Name) else f"key{len(keys)}"
        key_names.append(
            base if base.lower() not in {n.lower() for n in key_names} else f"{base}_{len(keys)}"
        )
    return keys, key_names
