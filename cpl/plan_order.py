"""A statement whose result depends on the order of its input's rows, reading a pattern's output
with PARTITION BY: it reads them in time order, once the watermark has passed them
(docs/language.md, "Patterns").

Spark runs a pattern's partitions apart, so across partitions their rows come in time order per
partition only (operators.analysis.partitions_apart); the reference executor's come in time order
throughout. What reads them by time (a TIME window, a join, a pattern, a limit EVERY duration that
holds its rows) gives the same result either way; what reads them by arrival would not: a TUPLE or
BATCH window, a keyed table's upserts, an UpdateSQL's statements. Before such a reader the planner
puts an OutputRate that lets every row out in rank order once the watermark has passed it
(`InTimeOrder` over one row at a time, deployer.output.limiter), on both engines. Its output has no
event time (Spark refuses rows behind a watermark the operators after it have seen), and at the end
of a bounded input the rows the final watermark has not passed are not read, as for every limit
after a pattern with PARTITION BY. A limit by count or FIRST on the reading statement itself needs
no node of its own: its OutputRate waits so (cpl.plan_output's `out_of_order`).
"""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_state import PlanState, Stream
from operators import graph as g
from operators.analysis import partitions_apart
from operators.output_node import ALL, OutputRate


def apart(state: PlanState, port: g.Port) -> g.Pattern | None:
    """The pattern with PARTITION BY whose rows reach `port` by arrival, if any."""
    return partitions_apart(g.Graph(tuple(state.nodes)), port)


def in_time_order(state: PlanState, streams: list[Stream], sel: ast.Select, reader: str) -> list[Stream]:
    """A statement's input `streams`, each read in time order (`read_in_time_order`)."""
    return [read_in_time_order(state, s, i.pos, reader) for s, i in zip(streams, sel.sources, strict=True)]


def read_in_time_order(state: PlanState, stream: Stream, pos: ast.Pos, reader: str) -> Stream:
    """`stream`, read in time order by `reader` (what depends on order, for the message) when a
    pattern's partitions reach it apart; else `stream` itself. One node per stream, which every
    such reader shares."""
    pattern = apart(state, stream.port)
    if pattern is None:
        return stream
    key = stream.name.lower()
    done = state.reordered.get(key)
    if done is not None:
        return done
    if stream.event_time is None:
        raise PlanError(
            f"{reader} reads '{stream.name}' in the order of its rows, which come from the pattern with "
            f"PARTITION BY at line {pattern.line}: its partitions' rows are read in time order, and "
            f"'{stream.name}' has no time to order them by: select `match_time() AS t` in that "
            "pattern's statement (and keep it in the statements between)",
            pos,
        )
    node = OutputRate(
        id=state.next_id(),
        line=stream.line,
        inputs=(stream.port,),
        input_schema=stream.schema,
        kind=ALL,
        every_events=1,
        width=len(stream.schema),
        time_index=stream.schema.position(stream.event_time),
        in_time_order=True,
    )
    ordered = Stream(stream.name, state.add(node), node.schema, None, stream.line, stream.is_source)
    state.reordered[key] = ordered
    return ordered
