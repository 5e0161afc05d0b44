"""Streams whose Spark watermark is one query's, and one of them that ends without an event.

Spark keeps one watermark per query, the least of its streams' watermarks, and counts a stream that
never had a row as 0. The language takes the watermark of a node of several inputs (a Union, a
join, a pattern) as the least of its inputs', but leaves out an input that ended without any event
(docs/language.md, "Merges"), also one whose rows come from such a stream through a window. So a
query that reads two streams with event time, one of which ends a `--until-idle` run without an
event, closed no TIME window of the other on Spark, where the reference closed them all (found by
the differential fuzzer, seed 1744: a Union of two TIME windows' rows, one window over a stream
with no file). The streams that meet in a merge and pass no Sequencer had the remedy already
(deployer.spark.streams.file_source: a placeholder row at `PLACED` at the end, once another stream
of the merge has had an event); this module finds the other streams that need it.

A stream whose file source marks its late events (`in_source`: it passes no Sequencer), or that a
Sequencer of its own holds (`held`: its source then sends the Sequencer an end-of-input row at
`PLACED`, which Spark's watermark, declared before the Sequencer, counts and the Sequencer drops),
gets it when every query that reads it and waits for Spark's watermark (a TIME window, a join, a
pattern, an OUTPUT limit by time: deployer.spark.run.watermarks.fired_by_watermark) reads another
stream with event time too, its *partners*: there the others' watermarks keep the query's from
going beyond what their events allow. A query that read it alone would keep the placeholder's
watermark in its checkpoint, and a later run's events would all be behind it; such a stream keeps
Spark's rule. Its source places the row when a partner that may place one too has had an event
(each notes that it has), or when a partner is one that places none (a stream of a merge whose
Sequencers hold it, or one not read from files), which with no event stays at 0 and so still holds
the query's watermark where it was.
"""

from __future__ import annotations

from collections.abc import Collection, Set
from dataclasses import dataclass

from operators import graph as g
from operators.analysis import ancestors
from operators.watermarks import fired_by_watermark, written


@dataclass(frozen=True)
class Partners:
    """A stream's partners: those whose sources note that they had an event (script order), and
    whether one is a stream that does not and places no row either (its watermark stays at 0
    without events)."""

    noted: tuple[str, ...]
    unmarked: bool


def partners(
    graph: g.Graph, in_source: Set[str], sinks: Collection[str], held: Set[str] = frozenset()
) -> dict[str, Partners]:
    """The streams of `in_source`, and of `held` (read from files, each held by a Sequencer of its
    own), that end without an event with a placeholder row (the module docstring), and their
    partners; `sinks`: the streams bound to sinks, any case."""
    roots = written(graph, sinks)
    order = [s.stream for s in graph.sources() if s.event_time is not None]
    queries = []
    for root in roots:
        upstream = ancestors(graph, root)
        if any(fired_by_watermark(n) for n in upstream):
            queries.append({n.stream for n in upstream if isinstance(n, g.Source) and n.stream in order})
    mine = {s: [q for q in queries if s in q] for s in order}
    placing = [s for s in order if (s in in_source or s in held) and mine[s]]
    placing = [s for s in placing if all(len(q) > 1 for q in mine[s])]
    noting = set(placing) | set(in_source)  # every stream its source marks notes its events
    out: dict[str, Partners] = {}
    for stream in placing:
        others = [s for s in order if s != stream and any(s in q for q in mine[stream])]
        out[stream] = Partners(tuple(s for s in others if s in noting), any(s not in noting for s in others))
    return out
