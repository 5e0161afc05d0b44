"""WHERE → Filter nodes. With ON SQL, the conditions on the event are checked before the query runs
(fewer store calls) and those that read its results after it."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import TypeCheckError
from cpl.plan_on_sql import plan_on_sql
from cpl.plan_state import Planned, PlanState
from cpl.scope import Scope
from cpl.typecheck import Checker
from operators import expr as ir
from operators import graph as g


def plan_where_and_sql(
    state: PlanState, sel: ast.Select, cur: Planned, scope: Scope, line: int
) -> tuple[Planned, Scope]:
    """WHERE before ON SQL for conjuncts about the event; after it for those that read its results."""
    pre: list[ast.Expr] = []
    post: list[ast.Expr] = []
    for c in _conjuncts(sel.where) if sel.where is not None else []:
        if sel.on_sql is None:
            pre.append(c)
            continue
        try:
            Checker(scope).check(c)
            pre.append(c)
        except TypeCheckError:
            post.append(c)
    cur = plan_filter(state, pre, cur, scope, line)
    if sel.on_sql is not None:
        cur, scope = plan_on_sql(state, sel.on_sql, cur, scope, line)
        cur = plan_filter(state, post, cur, scope, line)
    return cur, scope


def plan_filter(state: PlanState, parts: list[ast.Expr], cur: Planned, scope: Scope, line: int) -> Planned:
    """One Filter for the conjunction of `parts`; none when there are no conditions."""
    if not parts:
        return cur
    checker = Checker(scope)
    preds = [checker.check_bool(p, "WHERE") for p in parts]
    pred = ir.conjoin(preds)
    assert pred is not None
    port = state.add(
        g.Filter(
            id=state.next_id(),
            line=line,
            inputs=(cur.port,),
            input_schema=cur.schema,
            predicate=pred,
            event_time=cur.event_time,
        )
    )
    return Planned(port, cur.schema, cur.event_time)


def _conjuncts(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.BinaryOp) and e.op == "and":
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]
