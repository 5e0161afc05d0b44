"""OUTPUT [ALL | FIRST | LAST | SNAPSHOT] EVERY n EVENTS | duration → an OutputRate node at the end of
the statement (docs/language.md, "Output rate limiting").

The statement's own planner (plan_stateless, plan_aggregate, plan_pattern, plan_join) appends the
values of its GROUP BY keys to its row (`key_columns`), because only it can compute them (an
aggregate's keys need not be in its SELECT); the OutputRate node reads them after the row and passes
the row on without them.
"""

from __future__ import annotations

from collections.abc import Sequence

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_state import Planned, PlanState
from cpl.plan_windows import duration_ms
from cpl.unparse import expr as expr_text
from operators import expr as ir
from operators import graph as g
from operators.datatypes import Schema
from operators.output_node import FIRST, SNAPSHOT, OutputRate


def key_columns(keys: Sequence[ir.Expr], time: ir.Expr | None = None) -> list[g.NamedExpr]:
    """The group key values appended to a statement's row for its OutputRate, then the row's time
    when `time` is given (TIME_COLUMN, whether or not the SELECT shows it: the engines order and
    tick by it); `$` names are not valid CPL names, so they cannot clash with the SELECT's."""
    out = [g.NamedExpr(f"$key{i + 1}", k) for i, k in enumerate(keys)]
    return out if time is None else [*out, g.NamedExpr(TIME_COLUMN, time)]


TIME_COLUMN = "$time"


_NO_TIME_FIX = "declare its stream with TIMESTAMP BY, or limit by EVENTS"


def check_output(
    sel: ast.Select, *, aggregate: bool, event_time: str | None, what: str, fix: str = _NO_TIME_FIX
) -> None:
    """What an OUTPUT clause needs of its statement: SNAPSHOT a windowed aggregate (it shows each
    group's current value, which only a window has), a time-based limit event time (its ticks are
    the watermark's). `what`: the stream or statement that has no event time, and `fix` what to do,
    for the message."""
    out = sel.output
    if out is None:
        return
    if out.kind == SNAPSHOT:
        if not aggregate:
            raise PlanError(
                "OUTPUT SNAPSHOT needs a windowed aggregate (FROM s WINDOW w with count, sum, avg, min "
                "or max): it shows every group's current value, and only a window has one",
                out.pos,
            )
        if out.every is None:
            raise PlanError(
                "OUTPUT SNAPSHOT ticks on time: write EVERY duration, not EVERY n EVENTS", out.every_pos
            )
    if out.every is not None:
        duration_ms(out.every)  # a unit it knows, a positive amount
        if event_time is None:
            raise PlanError(
                f"OUTPUT ... EVERY {out.every.amount} {out.every.unit.upper()} ticks on event time, and "
                f"{what} has none: {fix}",
                out.pos,
            )


def plan_output(
    state: PlanState,
    sel: ast.Select,
    tip: Planned,
    line: int,
    snapshot_window: tuple[int, int] | None = None,
    out_of_order: bool = False,
) -> Planned:
    """The OutputRate node after the statement's last node, whose row ends with one column per GROUP
    BY key (`key_columns`); without an OUTPUT clause, the statement's tip unchanged. `out_of_order`:
    the rows may come out of time order on Spark (a pattern's with PARTITION BY, a join's)."""
    out = sel.output
    if out is None:
        return tip
    hidden_time = tip.schema.fields[-1].name == TIME_COLUMN
    width = len(tip.schema) - len(sel.group_by) - hidden_time
    visible = Schema(tip.schema.fields[:width])
    event_time = tip.event_time if tip.event_time is not None and visible.get(tip.event_time) else None
    time_index = len(tip.schema) - 1 if hidden_time else None
    if time_index is None and event_time is not None:
        time_index = visible.position(event_time)
    in_time_order = out_of_order and OutputRate.needs_time_order(out.kind, out.events)
    if in_time_order and time_index is None:
        raise PlanError(
            "this OUTPUT limit decides as rows come, so it reads rows that come out of time order (a "
            "pattern's with PARTITION BY, a join's) in time order, and these have no time to order them "
            "by: select `match_time() AS t` in that pattern's statement, or the left stream's event-time "
            "field in that join (and keep it in the statements between)",
            out.pos,
        )
    if out.kind != FIRST or in_time_order:
        # ALL and LAST let rows out after later ones (SNAPSHOT repeats earlier rows), FIRST in time
        # order after the watermark: their output has no event time, as an aggregate's has none
        # (docs/language.md, "Output rate limiting")
        event_time = None
    node = OutputRate(
        id=state.next_id(),
        line=line,
        inputs=(tip.port,),
        input_schema=tip.schema,
        kind=out.kind,
        every_events=out.events,
        every_ms=duration_ms(out.every) if out.every is not None else None,
        width=width,
        group_by=tuple(expr_text(k) for k in sel.group_by),
        snapshot_window=snapshot_window if out.kind == SNAPSHOT else None,
        time_index=time_index,
        in_time_order=in_time_order,
        event_time=event_time,
    )
    port = state.add(node)
    return Planned(port, node.schema, event_time)
