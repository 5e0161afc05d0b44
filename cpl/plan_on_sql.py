"""ON SQL → ReadSQL (a SELECT query: its result columns join the event) or UpdateSQL (INSERT, UPDATE
or DELETE: optionally the affected-row count joins it). The names after the query's alias are first
its parameters, read from the event, then the names of what it adds."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.describe import result_types
from cpl.errors import PlanError, TypeCheckError
from cpl.plan_state import Planned, PlanState
from cpl.scope import Input, Scope
from cpl.typecheck import Checker
from operators import expr as ir
from operators import graph as g
from operators.datatypes import Field, Schema


def plan_on_sql(
    state: PlanState, on: ast.OnSql, cur: Planned, scope: Scope, line: int
) -> tuple[Planned, Scope]:
    """The node running the query for each event, and the scope that sees its outputs too."""
    query = _query(state, on)
    args = _arguments(on, query, scope)
    out_names = _output_names(on, query, cur)
    if query.is_read:
        node: g.Node = _read_sql(state, on, query, args, out_names, cur, line)
    else:
        node = _update_sql(state, on, query, args, out_names, cur, line)
    port = state.add(node)
    extra = Schema(node.schema.fields[len(cur.schema) :])
    new_scope = Scope([*scope.inputs, Input(extra, frozenset({on.alias.lower()}), 0, len(cur.schema))])
    return Planned(port, node.schema, cur.event_time), new_scope


def _query(state: PlanState, on: ast.OnSql) -> g.SqlQuery:
    query = state.queries.get(on.query.lower())
    if query is None:
        raise PlanError(
            f"unknown SQL query '{on.query}'; declare it with CREATE SQLQUERY {on.query} ON store AS '...'",
            on.pos,
        )
    if len(on.names) < query.param_count:
        raise PlanError(
            f"'{query.name}' has {query.param_count} parameter(s) (?) but ON SQL names {len(on.names)} input field(s)",
            on.pos,
        )
    return query


def _arguments(on: ast.OnSql, query: g.SqlQuery, scope: Scope) -> tuple[ir.Expr, ...]:
    """The event fields bound to the query's parameters, in order."""
    checker = Checker(scope)
    try:
        return tuple(checker.check(ast.Name(n, on.pos)) for n in on.names[: query.param_count])
    except TypeCheckError as err:
        raise PlanError(
            f"{err.message} ('{query.name}' has {query.param_count} parameter(s), so the first "
            f"{query.param_count} name(s) after the alias are input fields and the rest name its result)",
            on.pos,
        ) from None


def _output_names(on: ast.OnSql, query: g.SqlQuery, cur: Planned) -> list[str]:
    """The names after the parameters: plain, and new to the event."""
    outs = on.names[query.param_count :]
    for o in outs:
        if len(o) != 1:
            raise PlanError(f"output name '{'.'.join(o)}' must be a plain name", on.pos)
    out_names = [o[0] for o in outs]
    for n in out_names:
        if n in cur.schema:
            raise PlanError(
                f"ON SQL output '{n}' has the name of an input field; choose another name", on.pos
            )
    return out_names


def _read_sql(
    state: PlanState,
    on: ast.OnSql,
    query: g.SqlQuery,
    args: tuple[ir.Expr, ...],
    out_names: list[str],
    cur: Planned,
    line: int,
) -> g.ReadSQL:
    if not out_names:
        raise PlanError(f"ON SQL with the SELECT '{query.name}' needs names for its result columns", on.pos)
    # RETURNS, else what the store described, else text (cpl.describe, docs/language.md).
    types = result_types(query, len(out_names), on.pos)
    result = tuple(Field(n, t) for n, t in zip(out_names, types, strict=True))
    try:
        Schema(result)
    except ValueError as err:
        raise PlanError(f"ON SQL outputs: {err}", on.pos) from None
    return g.ReadSQL(
        id=state.next_id(),
        line=line,
        inputs=(cur.port,),
        input_schema=cur.schema,
        query=query,
        alias=on.alias,
        args=args,
        result_fields=result,
        outer=on.outer,
        event_time=cur.event_time,
    )


def _update_sql(
    state: PlanState,
    on: ast.OnSql,
    query: g.SqlQuery,
    args: tuple[ir.Expr, ...],
    out_names: list[str],
    cur: Planned,
    line: int,
) -> g.UpdateSQL:
    if on.outer:
        raise PlanError("OUTER only applies to ON SQL with a SELECT", on.pos)
    if len(out_names) > 1:
        raise PlanError(
            f"'{query.name}' is an {query.kind.upper()}: ON SQL names at most one output, its affected-row count",
            on.pos,
        )
    return g.UpdateSQL(
        id=state.next_id(),
        line=line,
        inputs=(cur.port,),
        input_schema=cur.schema,
        query=query,
        alias=on.alias,
        args=args,
        count_field=out_names[0] if out_names else None,
        event_time=cur.event_time,
    )
