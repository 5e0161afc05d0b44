"""Graph-to-graph passes run after planning. Each is a pure function `Graph -> Graph`."""

from __future__ import annotations

from dataclasses import replace

from operators import graph as g


def _rewire(
    nodes: list[g.Node], streams: dict[str, g.Port], moved: dict[g.Port, g.Port]
) -> tuple[list[g.Node], dict[str, g.Port]]:
    out = [
        replace(n, inputs=tuple(moved.get(p, p) for p in n.inputs))
        if any(p in moved for p in n.inputs)
        else n
        for n in nodes
    ]
    return out, {name: moved.get(p, p) for name, p in streams.items()}


def fuse_multifilters(graph: g.Graph) -> g.Graph:
    """Sibling Filters reading one port become one MultiFilter: one pass over the input (paper, Table 1)."""
    groups: dict[g.Port, list[g.Filter]] = {}
    for n in graph.nodes:
        if isinstance(n, g.Filter):
            groups.setdefault(n.inputs[0], []).append(n)
    fused = {port: fs for port, fs in groups.items() if len(fs) > 1}
    if not fused:
        return graph
    moved: dict[g.Port, g.Port] = {}
    replaced: dict[str, g.Node | None] = {}
    for port, filters in fused.items():
        first = filters[0]
        mf = g.MultiFilter(
            id=first.id,
            line=first.line,
            inputs=(port,),
            input_schema=first.input_schema,
            predicates=tuple(f.predicate for f in filters),
            event_time=first.event_time,
        )
        replaced[first.id] = mf
        for i, f in enumerate(filters):
            moved[g.Port(f.id)] = g.Port(first.id, i)
            if i:
                replaced[f.id] = None
    nodes: list[g.Node] = []
    for n in graph.nodes:
        if n.id in replaced:
            r = replaced[n.id]
            if r is not None:
                nodes.append(r)
        else:
            nodes.append(n)
    nodes, streams = _rewire(nodes, graph.streams, moved)
    return replace(graph, nodes=tuple(nodes), streams=streams)


def add_sinks(graph: g.Graph) -> g.Graph:
    """Every statement output that nothing reads becomes a Sink: a result the user sees."""
    consumed = {p for n in graph.nodes for p in n.inputs}
    sources = {s.stream.lower() for s in graph.sources()}
    nodes = list(graph.nodes)
    for name, port in graph.streams.items():
        if name.lower() in sources or port in consumed:
            continue
        producer = graph.node(port.node)
        nodes.append(
            g.Sink(
                id=f"sink:{name}",
                line=graph.stream_lines.get(name, producer.line),
                inputs=(port,),
                stream=name,
                input_schema=producer.schema,
                event_time=producer.event_time,
            )
        )
    return replace(graph, nodes=tuple(nodes))


def renumber(graph: g.Graph) -> g.Graph:
    """Node ids n1, n2, ... in topological order, so that dumps are stable whatever passes ran."""
    ids = {n.id: f"n{i + 1}" for i, n in enumerate(graph.nodes)}
    moved = {}
    for n in graph.nodes:
        for k in range(max(n.outputs, 1)):
            moved[g.Port(n.id, k)] = g.Port(ids[n.id], k)
    nodes = [replace(n, id=ids[n.id], inputs=tuple(moved[p] for p in n.inputs)) for n in graph.nodes]
    streams = {name: moved[p] for name, p in graph.streams.items()}
    return replace(graph, nodes=tuple(nodes), streams=streams)


PASSES = (fuse_multifilters, add_sinks, renumber)
