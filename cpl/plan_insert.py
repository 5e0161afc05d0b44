"""INSERT INTO stream / INSERT INTO TABLE ... SELECT: checks the target, plans the statement as a
Pattern (FROM PATTERN / SEQUENCE), a Join (two windowed inputs), an Aggregate (one windowed input)
or stateless (no window), then names its output stream or Materializes it into the table."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_aggregate import plan_aggregate
from cpl.plan_join import plan_join
from cpl.plan_materialize import plan_materialize
from cpl.plan_pattern import plan_pattern
from cpl.plan_state import Planned, PlanState, SkipStatement, Stream
from cpl.plan_stateless import plan_stateless
from operators import graph as g


def plan_insert(state: PlanState, stmt: ast.Insert) -> None:
    table = _target_table(state, stmt)
    sel = stmt.select
    streams = [_input_stream(state, i, stmt.target) for i in sel.sources]
    out = _plan_select(state, sel, streams, stmt.pos.line)
    if table is not None:
        plan_materialize(state, stmt, table, out)
    else:
        state.streams[stmt.target.lower()] = Stream(
            stmt.target, out.port, out.schema, out.event_time, stmt.pos.line, False
        )


def _target_table(state: PlanState, stmt: ast.Insert) -> g.Table | None:
    """The table of INSERT INTO TABLE; None for a new stream, whose name must be free."""
    if stmt.into_table:
        table = state.tables.get(stmt.target.lower())
        if table is None:
            raise PlanError(
                f"unknown table '{stmt.target}'; declare it with CREATE TABLE ... IN store", stmt.target_pos
            )
        return table
    state.check_new_stream(stmt.target, stmt.target_pos)
    if stmt.target.lower() in state.tables:
        raise PlanError(f"'{stmt.target}' is a table: write INSERT INTO TABLE {stmt.target}", stmt.target_pos)
    return None


def _input_stream(state: PlanState, item: ast.FromItem, target: str) -> Stream:
    s = state.streams.get(item.stream.lower())
    if s is not None:
        return s
    if item.stream.lower() in state.failed:
        raise SkipStatement()
    if item.stream.lower() == target.lower():
        raise PlanError(f"statement reads its own output '{target}': streams cannot form a cycle", item.pos)
    raise PlanError(
        f"unknown stream '{item.stream}'; declare it with CREATE STREAMSCHEMA or produce it in an earlier statement",
        item.pos,
    )


def _plan_select(state: PlanState, sel: ast.Select, streams: list[Stream], line: int) -> Planned:
    if sel.pattern is not None:
        return plan_pattern(state, sel, line)
    windowed = [i for i in sel.sources if i.window is not None]
    if len(windowed) == 2 and len(sel.sources) == 2:
        return plan_join(state, sel, streams, line)
    if len(windowed) == 1 and len(sel.sources) == 1:
        return plan_aggregate(state, sel, streams[0], line)
    if windowed:
        raise PlanError(
            "a statement reads one stream with a WINDOW (aggregate) or two streams with TIME windows (join)",
            windowed[0].window_pos,
        )
    return plan_stateless(state, sel, streams, line)
