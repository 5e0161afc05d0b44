"""Which pattern statements share one streaming query, answered from the graph alone (no pyspark
here: deployer.spark.run.queries plans with it, `cep explain --queries` prints it).

A sink whose rows are a pattern's matches, as they are or through Maps (`split_chain`), over source
streams directly, would be a query of its own: it reads its sources, runs their Sequencers and its
pattern's state every micro-batch, and so does every other such sink, though most of that work is
the same (a deployment of rules over the same streams is what a CEP engine is for). So the sinks
of patterns that read the same source streams share one query, `patterns:<stream>+<stream>...`
(deployer.spark.patterns.shared): one read of the sources, one Sequencer per stream, one stateful
operator whose keys are (pattern, partition key), its rows split by pattern in the query's
foreachBatch. Only the same streams: Spark's watermark is one per query, the least of its streams',
and a pattern's deadlines (WITHIN, absence) fire at it, so a pattern must not meet the watermark of
a stream it does not read (docs/language.md, "A window beside another stream's rows"). Not a
pattern with two sinks (each would write its failures). A pattern sink alone over its streams has
such a query too, named the same.

A query that has started (its checkpoint has its progress) keeps its sinks, and takes no new one:
it resumes where it stopped, and a sink that joined it would miss the events it read before. The
pattern sinks the script's next version adds over the same streams share a query of their own,
which reads the streams from the beginning, `patterns:<streams>~2` (then `~3`, ...: one more than
any started before); a sink removed from the script is no longer run, and cannot come back under
its name once its query has gone on without it (deployer.spark.run.layout.refuse_comebacks). So the
groups depend on the checkpoint (`started`: the queries it started and the sinks each wrote, which
the deployment records in it, deployer.spark.run.shared_record); without one, the sinks over the
same streams share one query.

A checkpoint written before this layout ran each pattern sink in a query of its own, with its
progress and state: it is resumed so (`APART`, deployer.spark.run.layout).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from operators import graph as g

PREFIX = "patterns:"
GENERATION = "~"  # patterns:a+b~2: the second query of the pattern sinks over a and b
# In plan_queries' `kept`: the checkpoint is of the layout in which every pattern sink was a query
# of its own (deployer.spark.run.layout.patterns_apart)
APART = "pattern sinks apart"


def split_chain(graph: g.Graph, port: g.Port) -> tuple[g.Node, list[g.Map]] | None:
    """For the rows of `port`: the window, join, pattern or data store call they come from through
    Maps only (none or more), and those Maps from the first; None when they do not (deployer.spark.
    run.failures splits a micro-batch of that node's rows and translates the Maps over each)."""
    chain: list[g.Map] = []
    node = graph.node(port.node)
    while isinstance(node, g.Map) and port.index == 0:
        chain.insert(0, node)
        port = node.inputs[0]
        node = graph.node(port.node)
    if port.index == 0 and isinstance(node, g.Aggregate | g.Join | g.ReadSQL | g.UpdateSQL | g.Pattern):
        return node, chain
    return None


def _over_sources(graph: g.Graph, port: g.Port) -> g.Pattern | None:
    """The pattern the rows of `port` are the matches of through Maps, if its inputs are all source
    streams."""
    found = split_chain(graph, port)
    if found is None or not isinstance(found[0], g.Pattern):
        return None
    node = found[0]
    if all(p.index == 0 and isinstance(graph.node(p.node), g.Source) for p in node.inputs):
        return node
    return None


def reads(graph: g.Graph, node: g.Pattern) -> tuple[str, ...]:
    """The source streams a pattern over sources reads, lower-case, sorted."""
    sources = [graph.node(p.node) for p in node.inputs]
    return tuple(sorted({s.stream.lower() for s in sources if isinstance(s, g.Source)}))


def pattern_groups(
    graph: g.Graph,
    sinks: Iterable[str],
    kept: Collection[str] = (),
    started: Mapping[str, Collection[str]] | None = None,
) -> list[tuple[str, tuple[str, ...]]]:
    """The queries pattern sinks share: (name, its sinks in the order of `sinks`), in the order of
    their first sinks; none for a checkpoint of the earlier layout (`APART` in `kept`). `started`:
    the shared queries the checkpoint has started -> the sinks each wrote (lower-case), which they
    keep; the other sinks over their streams share the next generation (the module docstring)."""
    if APART in kept:
        return []
    found = {s: p for s in sinks if (p := _over_sources(graph, graph.streams[s])) is not None}
    per_pattern = Counter(p.id for p in found.values())
    homes = {sink: name for name, members in (started or {}).items() for sink in members}
    groups: dict[str, list[str]] = {}
    for sink, node in found.items():
        if per_pattern[node.id] == 1:
            base = PREFIX + "+".join(reads(graph, node))
            home = homes.get(sink.lower())
            if home is None or (home != base and not home.startswith(base + GENERATION)):
                home = next_generation(
                    base, started or {}
                )  # a query that moved to other streams: compat refuses it
            groups.setdefault(home, []).append(sink)
    return [(name, tuple(members)) for name, members in groups.items()]


def next_generation(base: str, started: Mapping[str, Collection[str]]) -> str:
    """The shared query named after `base` that no started query holds: `base` while no query of
    that name has started, else the generation after the last started (`base~2`, `base~3`, ...)."""
    taken = [name for name in started if name == base or name.startswith(base + GENERATION)]
    if not taken:
        return base
    last = max(int(n.removeprefix(base + GENERATION)) if n != base else 1 for n in taken)
    return f"{base}{GENERATION}{last + 1}"


def grouped(groups: list[tuple[str, tuple[str, ...]]]) -> dict[str, str]:
    """Sink -> the name of the query it shares."""
    return {sink: name for name, members in groups for sink in members}


# Written into a checkpoint whose pattern sinks over the same streams share a query
# (deployer.spark.run.layout.patterns_apart writes it; the run's checkpoint guard reads it).
MARK = "pattern-sinks-share-queries"
