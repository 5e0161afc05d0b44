"""The source streams of a Spark deployment, built once and shared by all its queries.

Each bound source is read (deployer.spark.streams.sources: file directories and the synthetic generator;
deployer.spark.streams.redis_source: Redis streams; deployer.spark.streams.trigger_source: triggers), its rows split into events and dead letters, and the
streams with event time pass the Sequencer: alone, or together with the streams they meet in a merge
(deployer.spark.run.queries.sequenced_merges, deployer.spark.streams.merge_sequencer).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from deployer.connectors.redis_stream import is_redis_stream_uri
from deployer.spark.run import coupled, held
from deployer.spark.run.checkpoint import arrival_log, trigger_start
from deployer.spark.run.layout import late_marked_by_sources, sequencer_timers, unheld_streams
from deployer.spark.run.queries import sequenced_merges
from deployer.spark.run.watermarks import declares_watermarks
from deployer.spark.streams.redis_source import redis_parsed
from deployer.spark.streams.sources import (
    SourceError,
    counted,
    events_of,
    file_parsed,
    generator_source,
    sequence,
)
from deployer.spark.streams.trigger_source import trigger_parsed
from deployer.triggers import clock
from deployer.triggers.ticks import SCHEME
from operators import graph as g
from operators.analysis import self_merged_sources


@dataclass
class Inputs:
    """Per source stream, its events (`frames`, in the order of the script's sources), and for the
    query that writes the dead letters (deployer.spark.run.failures.dead_letters), which reads each
    source once and passes each Sequencer once: per stream whose source rejects records, its parsed
    rows, and per stream with event time, the Sequencer's output before its split into events and
    late events, and whether it was merged (sources.sequence)."""

    frames: dict[str, DataFrame] = field(default_factory=dict)
    parsed: dict[str, DataFrame] = field(default_factory=dict)
    marked: dict[str, tuple[DataFrame, bool]] = field(default_factory=dict)


def read_inputs(
    spark: SparkSession,
    graph: g.Graph,
    uris: Mapping[str, str],
    checkpoint: Path,
    max_files_per_trigger: int | None = None,
    spool: Any = None,
    sinks: Collection[str] = (),
) -> Inputs:
    """The events and dead letters of every source of `graph`; `uris`: stream → its bound URI.
    `spool` (deployer.spark.streams.spool.Spool): the sources whose rejected records and late
    events the tasks of the one query that reads them write (`input-<stream>`, `late-<stream>`
    among its labels); the others' are the dead-letters query's. The Sequencers keep Spark's event-time
    timers on a checkpoint of the earlier layout that had them (deployer.spark.run.layout). `sinks`:
    the streams bound to sinks, where the order of a stream's events shows (deployer.spark.run.held)."""
    frames: dict[str, DataFrame] = {}
    parsed: dict[str, DataFrame] = {}
    timed: dict[str, tuple[g.Source, DataFrame]] = {}
    merges = sequenced_merges(graph, uris)
    self_merged = self_merged_sources(graph)
    alone = _alone(graph, merges, self_merged) if late_marked_by_sources(checkpoint) else set()
    # streams with a WATERMARK delay, or in a merge, whose order shows nowhere: no Sequencer either
    unheld = unheld_streams(checkpoint, held.unheld(graph, uris, sinks), merges)
    alone |= {s.stream for s in graph.sources() if s.stream.lower() in unheld}
    met = {s: [o for o in m if o != s] for m in merges if m[0].lower() in unheld for s in m}
    merges = [m for m in merges if m[0] not in met]
    in_source = {s.stream for s in graph.sources() if s.stream in alone and _from_files(uris[s.stream])}
    # an earlier layout's Sequencers (`timers`) are in Spark's event-time mode, which needs one
    timers = sequencer_timers(checkpoint)
    watermarks = declares_watermarks(graph) or timers
    placing = _placing(graph, (in_source, merges, self_merged, uris), met, sinks, checkpoint, watermarks)
    for src in graph.sources():
        uri = uris[src.stream]
        if uri.startswith("generator:"):
            frames[src.stream] = generator_source(spark, uri, src, watermarks)
            continue
        # its rejected records spooled by the tasks that parse them, where its query writes them
        spooled = spool if spool is not None and f"input-{src.stream}" in spool.labels else None
        if uri == SCHEME:
            start = trigger_start(checkpoint, src.stream)
            parsed[src.stream] = trigger_parsed(spark, src, start, clock.current(), spooled)
        elif is_redis_stream_uri(uri):
            parsed[src.stream] = redis_parsed(spark, uri, src, spooled)
        else:
            log, given = arrival_log(checkpoint, src.stream), placing.get(src.stream, (None, False))
            parsed[src.stream] = file_parsed(
                spark, uri, src, log, max_files_per_trigger, src.stream in in_source, spooled, *given
            )
        # the records read counted; the rejected ones dropped (spooled, or the dead-letters query's)
        good = events_of(counted(parsed[src.stream], src), src)
        if src.event_time is None:
            frames[src.stream] = good
        else:
            timed[src.stream] = (src, good)
    marked: dict[str, tuple[DataFrame, bool]] = {}
    placed = set(placing) & in_source  # a held stream's placeholder is its end row, which its Sequencer drops
    sequenced = sequence(timed, merges, self_merged, marked, spool, timers, in_source, watermarks, placed)
    for stream, events in sequenced.items():
        frames[stream] = events
    return Inputs({s.stream: frames[s.stream] for s in graph.sources()}, parsed, marked)


def _alone(graph: g.Graph, merges: list[tuple[str, ...]], self_merged: set[str]) -> set[str]:
    """The streams with WATERMARK 0 that, read from files, have their late events marked by their
    source and pass no Sequencer (deployer.spark.streams.file_source): with event time, alone (in no
    merge that is sequenced together, not meeting themselves in one: those are released strictly
    below their watermark, so they hold events back)."""
    together = {s for merge in merges for s in merge} | self_merged
    return {
        src.stream
        for src in graph.sources()
        if src.event_time is not None and not src.watermark_ms and src.stream not in together
    }


def _placing(
    graph: g.Graph,
    read: tuple[set[str], list[tuple[str, ...]], set[str], Mapping[str, str]],
    met: dict[str, list[str]],
    sinks: Collection[str],
    checkpoint: Path,
    watermarks: bool,
) -> dict[str, tuple[list[Path], bool]]:
    """The streams whose file sources end a run without an event with a placeholder row: those of a
    merge that passes no Sequencer (`met`), and the others that share their queries' watermark
    (deployer.spark.run.coupled: with Spark's watermark declared), marked by their sources or held
    by a Sequencer of their own; each with the arrival logs of the streams whose events allow it, and
    whether a stream that places no such row does. `read`: the streams marked by their sources, the
    merges held together, the streams that meet themselves in a merge, the sources' URIs."""
    in_source, merges, self_merged, uris = read
    together = {s for merge in merges for s in merge} | self_merged
    timed = [s.stream for s in graph.sources() if s.event_time is not None and _from_files(uris[s.stream])]
    # a stream that meets itself in a merge has Spark's watermark after its Sequencer, which drops
    # the end row: it places none (deployer.spark.streams.sources.sequence)
    held = {s for s in timed if s not in in_source and s not in together}
    partners = coupled.partners(graph, in_source, sinks, held) if watermarks else {}
    partners |= {s: coupled.Partners(tuple(others), False) for s, others in met.items()}
    return {s: ([arrival_log(checkpoint, o) for o in p.noted], p.unmarked) for s, p in partners.items()}


def _from_files(uri: str) -> bool:
    return not (uri.startswith("generator:") or uri == SCHEME or is_redis_stream_uri(uri))


def stream_named(graph: g.Graph, name: str) -> str:
    """The graph's own name of stream `name` (a binding names it case-insensitively)."""
    for s in graph.streams:
        if s.lower() == name.lower():
            return s
    raise ValueError(f"the script has no stream named '{name}'; its streams: {', '.join(graph.streams)}")


def source_uri(src: g.Source, sources: Mapping[str, str]) -> str:
    """The URI bound to `src`'s stream (names match case-insensitively); a trigger's is its own."""
    if src.trigger is not None:
        return SCHEME
    uri = next((u for s, u in sources.items() if s.lower() == src.stream.lower()), None)
    if uri is None:
        raise SourceError(f"stream '{src.stream}' has no input: add --source {src.stream}=file:DIR")
    return uri
