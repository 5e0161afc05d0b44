"""The result types of a SELECT from the data store it runs against (docs/language.md, "SQL queries").

RETURNS, when written, is the user's declaration and wins. Without it, a script compiled with its
data stores bound (`compile_script(..., describe=...)`: `cep run`, `cep check`, `cep explain`, the
service) takes the types the store describes, so that `p.idplan + 1` type-checks when the store says
`idplan` is an integer. The compiler only sees the `DescribeQuery` protocol of operators.declarations
(stores/describe.py implements it): it stays independent of every store.

When the store cannot say (not reachable, a table that does not exist yet, a store left unbound),
the result columns are varchar, as without bound stores, and a warning at the CREATE SQLQUERY says
why: nothing fails later because of it, since every value has a varchar form (operators.results).
With RETURNS the store is asked too, for two things only: a column count that differs from the
declaration is an error, and a column the store vouches for with the declared type spares the
engines the per-value check, a value that does not fit it stopping the run as a changed column type
(operators.analysis.vouched_results).
"""

from __future__ import annotations

from dataclasses import replace

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_state import PlanState
from operators import graph as g
from operators.datatypes import T_STRING, DataType
from operators.declarations import DescribeError, ResultColumn


def described(state: PlanState, query: g.SqlQuery, store: g.DataStore, pos: ast.Pos) -> g.SqlQuery:
    """`query` with what its store says it returns, when the stores are bound and it can say."""
    if state.describe is None or not query.is_read:
        return query
    try:
        columns = state.describe(query, store)
    except DescribeError as err:
        if query.returns is None:
            state.warnings.append(
                (
                    f"the result types of '{query.name}' were not read from data store {store.name}: "
                    f"{err}; its result columns are read as varchar (declare RETURNS (...) to type them)",
                    pos,
                )
            )
        return query
    if query.returns is not None and len(query.returns) != len(columns):
        raise PlanError(
            f"'{query.name}' RETURNS {len(query.returns)} column(s) but data store {store.name} "
            f"says it returns {len(columns)}: {_shown(columns)}",
            pos,
        )
    return replace(query, described=columns)


def result_types(query: g.SqlQuery, count: int, pos: ast.Pos) -> list[DataType]:
    """The types of the `count` result columns ON SQL names: RETURNS, else the store's, else varchar."""
    if query.returns is not None:
        if len(query.returns) != count:
            raise PlanError(
                f"'{query.name}' RETURNS {len(query.returns)} column(s) but ON SQL names {count}", pos
            )
        return [f.type for f in query.returns]
    if query.described is not None:
        if len(query.described) != count:
            raise PlanError(
                f"'{query.name}' returns {len(query.described)} column(s) ({_shown(query.described)}, as data "
                f"store {query.store} describes it) but ON SQL names {count}",
                pos,
            )
        return [c.type for c in query.described]
    return [T_STRING] * count


def _shown(columns: tuple[ResultColumn, ...]) -> str:
    return ", ".join(f"{c.name} {c.type}" for c in columns)
