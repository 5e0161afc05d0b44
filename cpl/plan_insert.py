"""INSERT INTO stream / INSERT INTO TABLE ... SELECT: checks the target, plans the statement as a
Pattern (FROM PATTERN / SEQUENCE), a Join (two windowed inputs), an Aggregate (one windowed input)
or stateless (no window), then names its output stream or Materializes it into the table."""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_aggregate import plan_aggregate
from cpl.plan_join import plan_join
from cpl.plan_materialize import plan_materialize
from cpl.plan_order import in_time_order, unordered
from cpl.plan_pattern import plan_pattern
from cpl.plan_state import Planned, PlanState, SkipStatement, Stream
from cpl.plan_stateless import plan_stateless
from operators import graph as g
from operators.analysis import partition_keyed


def plan_insert(state: PlanState, stmt: ast.Insert) -> None:
    table = _target_table(state, stmt)
    sel = stmt.select
    streams = [_input_stream(state, i, stmt.target) for i in sel.sources]
    reader = _updates(state, sel)
    if reader is not None:
        streams = in_time_order(state, streams, sel, reader)
    mark = (len(state.nodes), len(state.warnings))
    out = _plan_select(state, sel, streams, stmt.pos.line)
    if table is not None and _upserts_across_partitions(state, sel, table, out):
        # planned again behind the inputs in time order: only now is it known what the key reads
        for node in state.nodes[mark[0] :]:
            state.unordered.pop(node.id, None)
        del state.nodes[mark[0] :], state.warnings[mark[1] :]
        reader = f"INSERT INTO TABLE {table.name} (an upsert by its primary key)"
        out = _plan_select(state, sel, in_time_order(state, streams, sel, reader), stmt.pos.line)
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


def _updates(state: PlanState, sel: ast.Select) -> str | None:
    """A statement without windows whose UpdateSQL runs its statements in the order rows come (for
    the message of cpl.plan_order); None when it has none (a window counts in plan_aggregate, an
    OUTPUT limit waits by itself)."""
    if sel.pattern is not None or any(i.window is not None for i in sel.sources) or sel.on_sql is None:
        return None
    query = state.queries.get(sel.on_sql.query.lower())
    return f"ON SQL {sel.on_sql.query}" if query is not None and not query.is_read else None


def _upserts_across_partitions(state: PlanState, sel: ast.Select, table: g.Table, out: Planned) -> bool:
    """Whether a statement without windows upserts a pattern's rows with PARTITION BY into a keyed
    table by a key that is not the partition key: the last of two partitions' rows to one key would
    then win by their arrival (cpl.plan_order)."""
    if not table.primary_key or sel.pattern is not None or any(i.window is not None for i in sel.sources):
        return False
    if unordered(state, out.port) is None:
        return False
    graph = g.Graph(tuple(state.nodes))
    names = [f.name.lower() for f in out.schema]
    return not any(
        k.lower() in names and partition_keyed(graph, out.port, names.index(k.lower()))
        for k in table.primary_key
    )


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
