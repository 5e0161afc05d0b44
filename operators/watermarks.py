"""The operators the watermark fires, and those that an engine keeping one watermark per query
(Spark) holds back by streams they do not read.

In the language a TIME window closes, a join evicts, a pattern's deadline passes and an OUTPUT
limit by time ticks when the watermark of the operator's own input passes (docs/language.md,
"Merges"). Spark keeps one watermark per streaming query, the least of the watermarks of all the
streams with event time it reads, and a statement's rows, with all that computes them, are one
query. Where an operator's rows meet another stream's after it without event time (a Union of two
windows' rows, one over s1, the other over s2), the query reads a stream the operator does not, and
on Spark the operator waits for that stream's watermark too (docs/language.md, "Engines": "A window
beside another stream's rows").
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from operators import graph as g
from operators.output_node import OutputRate


def fired_by_watermark(node: g.Node) -> bool:
    """Whether the watermark drives the operator: it emits (a TIME window's rows) or evicts (a
    join's state) once the watermark passes. The other stateful operators (TUPLE and BATCH windows)
    act on the events alone and register no timers (a window that holds an OUTPUT limit registers
    the limit's: the OutputRate node's, which says so here); nor does an OUTPUT limit by count."""
    if isinstance(node, g.Pattern):
        return True  # its deadlines (absences, WITHIN) are event-time timers
    if isinstance(node, OutputRate):
        return node.every_ms is not None  # its ticks are event-time timers
    return isinstance(node, g.Join) or (isinstance(node, g.Aggregate) and node.window.kind == "time")


def written(graph: g.Graph, sinks: Collection[str]) -> list[str]:
    """The nodes whose rows a run writes, each the root of a query on Spark: those of the streams
    bound to `sinks` (any case), then every table's."""
    asked = {s.lower() for s in sinks}
    roots = [port.node for name, port in graph.streams.items() if name.lower() in asked]
    return list(dict.fromkeys(roots + [n.id for n in graph.nodes if isinstance(n, g.Materialize)]))


def held_by_other_streams(graph: g.Graph, roots: Iterable[str]) -> dict[str, tuple[g.Node, list[str]]]:
    """For each operator the watermark fires in the query of one of `roots` (node ids: what a sink
    or a table writes) that reads streams with event time the operator does not: the root it was
    found under first and those streams (script order), by the operator's id. One pass over the
    plan (producers first): a script of a thousand statements is compiled with it."""
    timed = [s.stream for s in graph.sources() if s.event_time is not None]
    streams: dict[str, frozenset[str]] = {}  # the streams with event time a node's rows come from
    fired: dict[str, frozenset[str]] = {}  # the operators the watermark fires upstream of a node
    for node in graph.nodes:
        own = {node.stream} if isinstance(node, g.Source) and node.event_time is not None else set()
        streams[node.id] = frozenset(own.union(*(streams[p.node] for p in node.inputs)))
        up = set().union(*(fired[p.node] for p in node.inputs))
        fired[node.id] = frozenset(up | {node.id} if fired_by_watermark(node) else up)
    place = {n.id: i for i, n in enumerate(graph.nodes)}
    found: dict[str, tuple[g.Node, list[str]]] = {}
    for root in dict.fromkeys(roots):
        for op in sorted(fired[root] - found.keys(), key=place.__getitem__):
            if streams[op] < streams[root]:
                found[op] = (graph.node(root), [s for s in timed if s in streams[root] - streams[op]])
    return found
