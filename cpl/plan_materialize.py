"""INSERT INTO TABLE: the Materialize node that writes a statement's output into a declared table,
after checking that every output field is a column of a compatible type and every required column
gets a value."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_state import Planned, PlanState
from operators import graph as g
from operators.datatypes import common_type


def plan_materialize(state: PlanState, stmt: ast.Insert, table: g.Table, out: Planned) -> None:
    for f in out.schema:
        col = table.columns.get(f.name)
        if col is None:
            raise PlanError(
                f"table '{table.name}' has no column '{f.name}'; its columns: {', '.join(table.columns.names)}",
                stmt.select.pos,
            )
        if common_type(col.type, f.type) is None:
            raise PlanError(
                f"column '{table.name}.{col.name}' is {col.type}, but the statement gives {f.type}",
                stmt.select.pos,
            )
    for col in table.columns:
        if col.name not in out.schema and not col.nullable:
            raise PlanError(
                f"the statement gives no value for the required column '{table.name}.{col.name}'",
                stmt.select.pos,
            )
    state.add(
        g.Materialize(
            id=state.next_id(),
            line=stmt.pos.line,
            inputs=(out.port,),
            input_schema=out.schema,
            table=table,
        )
    )
