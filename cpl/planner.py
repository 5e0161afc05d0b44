"""Statements → operator nodes (the paper's section 5 compiler).

Statements are planned in script order: a statement may read a stream declared with CREATE
STREAMSCHEMA or produced by an earlier statement, which is also what makes every graph acyclic.
Each INSERT becomes a short chain of nodes:

    inputs ─▶ [Union | Join | input] ─▶ Filter(WHERE on the event) ─▶ [ReadSQL | UpdateSQL]
           ─▶ Filter(WHERE on SQL results) ─▶ [Aggregate] ─▶ Map(SELECT) ─▶ [Materialize]

Nodes that would do nothing (an identity Map, an absent Filter) are not created.

`Planner` hands each statement to its module (`cpl.declarations`, `cpl.plan_insert`) and turns the
error that stops it into a diagnostic, so that the next statement is planned as usual.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpl import syntax_tree as ast
from cpl.declarations import (
    create_datastore,
    create_sqlquery,
    create_stream_schema,
    create_table,
    create_trigger,
    create_window,
)
from cpl.errors import Diagnostics, PlanError, TypeCheckError
from cpl.plan_insert import plan_insert
from cpl.plan_state import PlanState, SkipStatement


@dataclass
class Planner:
    diags: Diagnostics
    state: PlanState = field(default_factory=PlanState)

    def statement(self, stmt: ast.Statement) -> None:
        try:
            self._plan(stmt)
        except (PlanError, TypeCheckError) as err:
            self.diags.error(err.message, err.pos)
            if isinstance(stmt, ast.Insert):
                self.state.failed.add(stmt.target.lower())
            if isinstance(stmt, ast.CreateStreamSchema | ast.CreateTrigger):
                self.state.failed.add(stmt.name.lower())

    def _plan(self, stmt: ast.Statement) -> None:
        if isinstance(stmt, ast.CreateStreamSchema):
            create_stream_schema(self.state, stmt)
        elif isinstance(stmt, ast.CreateWindow):
            create_window(self.state, stmt)
        elif isinstance(stmt, ast.CreateDataStore):
            create_datastore(self.state, stmt)
        elif isinstance(stmt, ast.CreateSqlQuery):
            create_sqlquery(self.state, stmt)
        elif isinstance(stmt, ast.CreateTable):
            create_table(self.state, stmt)
        elif isinstance(stmt, ast.CreateTrigger):
            create_trigger(self.state, stmt)
        else:
            try:
                plan_insert(self.state, stmt)
            except SkipStatement:
                self.state.failed.add(stmt.target.lower())
