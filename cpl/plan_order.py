"""A statement whose result depends on the order of its input's rows, reading rows that come out of
time order on Spark (a pattern's with PARTITION BY, a join's): it reads them in time order, once
the watermark has passed them (docs/language.md, "Rows out of time order").

Spark runs a pattern's partitions apart, so across partitions their rows come in time order per
partition only, and a join makes a pair when the later of its events arrives, so a pair of an
earlier left event may come after pairs of later ones (operators.analysis.out_of_time_order); the
reference executor's rows come in time order. What reads them by time (a TIME window, a join, a
limit EVERY duration that holds its rows) gives the same result either way; what reads them by
arrival would not: a TUPLE or BATCH window, a keyed table's upserts, an UpdateSQL's statements.
Before such a reader the planner puts an OutputRate that lets every row out in rank order once the
watermark has passed it (`InTimeOrder` over one row at a time, deployer.output.limiter), on both
engines. Its output has no event time (Spark refuses rows behind a watermark the operators after it
have seen), and at the end of a bounded input the rows the final watermark has not passed are not
read, as for every limit that waits so. A limit by count or FIRST on the reading statement itself
needs no node of its own: its OutputRate waits so (cpl.plan_output's `out_of_order`).
"""

from __future__ import annotations

from cpl import syntax_tree as ast
from cpl.errors import PlanError
from cpl.plan_state import PlanState, Stream
from operators import graph as g
from operators.analysis import unordered_by
from operators.output_node import ALL, OutputRate


def unordered(state: PlanState, port: g.Port) -> g.Pattern | g.Join | None:
    """The pattern with PARTITION BY or the join whose rows reach `port` by arrival, if any: each
    node's answer computed once, from its inputs' (a script of thousands of statements asks for
    each of them)."""
    known = state.unordered
    for node in state.nodes[len(known) :]:  # those planned since the last question
        known[node.id] = unordered_by(node, [known[p.node] for p in node.inputs])
    return known[port.node]


def why(producer: g.Pattern | g.Join) -> str:
    """Where the rows come from, for a message."""
    if isinstance(producer, g.Join):
        return (
            f"the join at line {producer.line}, whose pairs come as their later event arrives: they are "
            "read in time order"
        )
    return (
        f"the pattern with PARTITION BY at line {producer.line}: its partitions' rows are read in time order"
    )


def fix(producer: g.Pattern | g.Join) -> str:
    """What gives the rows their time, for a message."""
    if isinstance(producer, g.Join):
        return "select the left stream's event-time field in that join (its output's time)"
    return "select `match_time() AS t` in that pattern's statement"


def in_time_order(state: PlanState, streams: list[Stream], sel: ast.Select, reader: str) -> list[Stream]:
    """A statement's input `streams`, each read in time order (`read_in_time_order`)."""
    return [read_in_time_order(state, s, i.pos, reader) for s, i in zip(streams, sel.sources, strict=True)]


def read_in_time_order(state: PlanState, stream: Stream, pos: ast.Pos, reader: str) -> Stream:
    """`stream`, read in time order by `reader` (what depends on order, for the message) when its
    rows come out of time order on Spark; else `stream` itself. One node per stream, which every
    such reader shares."""
    producer = unordered(state, stream.port)
    if producer is None:
        return stream
    key = stream.name.lower()
    done = state.reordered.get(key)
    if done is not None:
        return done
    if stream.event_time is None:
        raise PlanError(
            f"{reader} reads '{stream.name}' in the order of its rows, which come from {why(producer)}, "
            f"and '{stream.name}' has no time to order them by: {fix(producer)} (and keep it in the "
            "statements between)",
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
