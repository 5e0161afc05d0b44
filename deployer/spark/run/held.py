"""Which streams with a WATERMARK delay reach their statements with no stage to hold them back.

A stream with event time passes the Sequencer (deployer.spark.streams.sequencer), which decides its
late events in arrival order and, with a WATERMARK delay, holds the others back until the watermark
reaches them, to release them in event-time order: what the statements after it see is the
reference executor's order. That costs a stateful stage in every micro-batch (a shuffle, a state
store, a Python worker per task; a third of the end-to-end window job's micro-batch in bench/'s
e2e group).

The order shows only where a statement's result depends on it. A stream alone (in no merge, read
from files) whose every path goes, through statements that take each event by itself (WHERE, SELECT,
a MultiFilter's branches, `ON SQL` reads), into TIME windows without an OUTPUT clause, and is written
nowhere on the way (no sink bound to it or to a stream between), does not show it: a TIME window's
row is the same whatever the order of its events (count, sum, avg, min, max; the row's order key is
its first event's, the least), and Spark's own watermark, declared on the stream as it arrives,
closes the same windows at the same micro-batches either way; an event that is not late is never
behind it (docs/architecture.md, "What a run costs on Spark"). Such a stream is *unheld*: its file
source marks its late events itself, with its delay (deployer.spark.streams.lateness), as it does for
a stream alone with WATERMARK 0, and it passes no Sequencer.

So are the streams that meet in a merge (deployer.spark.streams.merge_sequencer) when every one of
them is read from files and, through a Union (whose output is its inputs' events, whatever their
order) and such statements, reaches only TIME windows: the merge's watermark, which closes their
windows, is then Spark's own, the least of the streams' watermarks, as the language's is. What
Spark does not keep (a stream's own watermark after a restart, a stream that ended without an
event) their file sources restate with placeholder rows (deployer.spark.streams.file_source).

Whether a stream passes a Sequencer is part of its queries' state (Spark finds an operator's state by
its place in the plan), so a checkpoint records the streams it left unheld (`RECORD`); a later run
keeps that, and a changed script that would need to hold one of them back is refused (`reheld`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from deployer.spark.run.queries import bound_uri, sequenced_merges
from operators import graph as g
from operators.analysis import self_merged_sources
from operators.output_node import OutputRate

# The unheld streams of a checkpoint's queries (lower-case names, JSON), written with their state.
RECORD = "streams-not-held.json"

# Statements that make what they make of an event from the event alone (a store read, from the
# table, which docs/language.md, "Engines", says a script's own writes may change in another order),
# and a Union, whose output is its inputs' events, whatever their order.
_PER_EVENT = (g.Filter, g.Map, g.MultiFilter, g.ReadSQL, g.Union)


def order_free(graph: g.Graph, source: g.Source, outputs: Collection[str]) -> bool:
    """Whether the order of `source`'s events shows nowhere (the module docstring): every path from
    it goes through `_PER_EVENT` statements into TIME windows without an OUTPUT clause, and none of
    the streams on the way is one of `outputs` (the streams bound to sinks, any case)."""
    asked = {o.lower() for o in outputs}
    written = {port for s, port in graph.streams.items() if s.lower() in asked}
    todo, readers_seen = [g.Port(source.id)], False
    while todo:
        port = todo.pop()
        if port in written:
            return False
        for node in graph.consumers(port):
            readers_seen = True
            if isinstance(node, g.Aggregate):
                limited = any(isinstance(n, OutputRate) for n in graph.consumers(g.Port(node.id)))
                if node.window.kind != "time" or limited:
                    return False
            elif isinstance(node, _PER_EVENT):
                todo.extend(g.Port(node.id, i) for i in range(node.outputs))
            else:
                return False
    return readers_seen


def unheld(graph: g.Graph, sources: Mapping[str, str], sinks: Collection[str]) -> list[str]:
    """The streams of `graph` that pass no Sequencer although they have a WATERMARK delay or meet
    others in a merge (lower-case names, sorted), given the sources' URIs and the streams bound to
    sinks: read from files, `order_free`, alone with a delay or in a merge whose every stream is so
    (meeting each other in Unions only: a join's or a pattern's order shows). (A stream alone with
    WATERMARK 0 passes none either, for another reason:
    deployer.spark.run.layout.late_marked_by_sources.)"""
    self_merged = self_merged_sources(graph)
    merge_of = {s: merge for merge in sequenced_merges(graph, sources) for s in merge}
    free = {}  # each source's walk once, however many merges' members ask for it
    for src in graph.sources():
        from_files = src.trigger is None and bound_uri(sources, src.stream).startswith("file:")
        ok = src.event_time is not None and from_files and src.stream not in self_merged
        free[src.stream] = ok and order_free(graph, src, sinks)
    out = []
    for src in graph.sources():
        merge = merge_of.get(src.stream)
        alone = merge is None and bool(src.watermark_ms) and free[src.stream]
        if alone or (merge is not None and all(free[s] for s in merge)):
            out.append(src.stream.lower())
    return sorted(out)


def split_merges(before: Collection[str], merges: Sequence[Sequence[str]]) -> list[str]:
    """Why a checkpoint whose queries left `before` unheld cannot be resumed by a script that merges
    one of those streams with a stream they held back (`merges`: the streams sequenced together)."""
    unheld = {s.lower() for s in before}
    return [
        f"the events of stream '{kept}' reached its TIME windows as they arrived, with no stage "
        f"holding them back to event-time order; the new script merges it with stream '{other}', "
        "which the checkpoint's queries hold back, and a merge's streams are held back together"
        for merge in merges
        for kept in merge
        if kept.lower() in unheld
        for other in merge
        if other.lower() not in unheld
    ][:1]


def has_state(checkpoint: Path) -> bool:
    """Whether some query of the checkpoint has kept state."""
    return any(d.is_dir() for d in checkpoint.glob("*/state"))


def refusals(checkpoint: Path, now: Collection[str]) -> list[str]:
    """`reheld` for a checkpoint: what its queries' state holds against a run that leaves only
    `now` unheld (none without state: the run starts them afresh, and records its own)."""
    before = recorded(checkpoint)
    return reheld(before, now) if before is not None and has_state(checkpoint) else []


def recorded(checkpoint: Path) -> list[str] | None:
    """The unheld streams a checkpoint's queries were started with (None: it has no record)."""
    path = checkpoint / RECORD
    if not path.is_file():
        return None
    names = json.loads(path.read_text())
    return [str(n) for n in names]


def record(checkpoint: Path, streams: Collection[str]) -> None:
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / RECORD).write_text(json.dumps(sorted(streams)))


def reheld(before: Collection[str], after: Collection[str]) -> list[str]:
    """Why a checkpoint whose queries left `before` unheld cannot be resumed by a script that leaves
    only `after` unheld: those queries have no Sequencer's state for the streams it would hold. (A
    stream unheld now and held before stays held: its Sequencer's state is there.)"""
    return [
        f"the events of stream '{s}' reached its TIME windows as they arrived, with no stage holding "
        "them back to event-time order (nothing else read it); the new script reads it where that "
        "order shows (a sink, another kind of statement, an OUTPUT clause), which needs that stage, "
        "and the checkpoint's queries have no state for it"
        for s in sorted(set(before) - set(after))
    ]
