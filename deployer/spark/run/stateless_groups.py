"""Which stateless sinks share one streaming query, answered from the graph alone (no pyspark here:
deployer.spark.run.queries plans with it, `cep explain --queries` prints it).

Two or more requested sinks whose streams need no state and no data store would each read their
inputs and compute what they have in common; they share one query, `sinks:stateless`, which reads
each input once per micro-batch (deployer.spark.run.shared). One alone keeps a query of its own.

A shared query that has started (its checkpoint has its progress) keeps its sinks, even when the
script's next version leaves it only one, and takes no new one: it resumes where it stopped, and a
sink that joined it would miss the events it read before. The stateless sinks a next version adds
share a query of their own, which reads the inputs from the beginning, `sinks:stateless~2` (then
`~3`, ...), when they are two or more, else the one gets a query of its own, as any new output; a
sink that had a query of its own keeps it. A sink removed from the script is no longer run, and
cannot come back under its name once its query has gone on without it
(deployer.spark.run.layout.refuse_comebacks). So the groups depend on the checkpoint (`started`:
the shared queries it started and the sinks each wrote, which the deployment records in it,
deployer.spark.run.shared_record, and the `sink:<name>` queries it started); without one, every
stateless sink shares the one query when they are two or more.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from deployer.spark.run.pattern_groups import GENERATION, next_generation
from operators import graph as g
from operators.analysis import stateless_upstream

SHARED_QUERY = "sinks:stateless"


def is_shared(query: str) -> bool:
    """Whether `query` is one of the stateless sinks' shared queries (a generation included)."""
    return query == SHARED_QUERY or query.startswith(SHARED_QUERY + GENERATION)


def stateless_sinks(graph: g.Graph, sinks: Iterable[str]) -> list[str]:
    """The streams among `sinks` (the graph's own names) computed without state or data store, in
    script order."""
    wanted = set(sinks)
    return [
        stream
        for stream, port in graph.streams.items()
        if stream in wanted and stateless_upstream(graph, graph.node(port.node))
    ]


def stateless_groups(
    graph: g.Graph, sinks: Iterable[str], started: Mapping[str, Collection[str]] | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """The queries stateless sinks share: (name, its sinks in script order), started ones first.
    `started`: the queries the checkpoint has started -> the sinks each wrote (lower-case): the
    shared ones keep theirs, a `sink:<name>` one keeps its sink apart (the module docstring)."""
    started = started or {}
    shared = {name: members for name, members in started.items() if is_shared(name)}
    homes = {sink: name for name, members in shared.items() for sink in members}
    apart = {sink for name, members in started.items() if name.startswith("sink:") for sink in members}
    groups: dict[str, list[str]] = {}
    new: list[str] = []
    for sink in stateless_sinks(graph, sinks):
        home = homes.get(sink.lower())
        if home is not None:
            groups.setdefault(home, []).append(sink)
        elif sink.lower() not in apart:
            new.append(sink)
    if len(new) >= 2:
        groups[next_generation(SHARED_QUERY, shared)] = new
    return [(name, tuple(members)) for name, members in groups.items()]
