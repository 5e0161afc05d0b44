"""The reference executor: pushes events one at a time through an operator graph (Siddhi/Esper style).

It defines what every operator means (CPL.md section 3); the Spark deployer is tested against it.

    ex = LocalExecutor(compile_script(text).graph, stores)
    ex.push("cdr1", (1, 2, 30, ts))          # a typed tuple in the source schema's field order
    ex.finish()                              # end of input: flush, fire complete windows
    ex.outputs["bill"]                       # every named stream can be tapped, not only sinks

Event time. A source declared with TIMESTAMP BY has a watermark W = (max event time seen) -
WATERMARK delay, meaning "every event with time < W has arrived". An event with time < W on
arrival is late: counted per stream, sent to the dead letters (stage "late") and dropped. Others
wait in a heap and are released in (event time, arrival) order once their time is < W, so results
are the same however the input is chunked or interleaved across streams. `advance_watermark` moves
W forward without an event (an idle source), `end_stream` ends one source, `finish` ends them all:
buffered events are released and the stream's final time is W itself (max event time - WATERMARK,
as Spark's watermark at the end of a bounded input), so a TIME window [s, e) fires at the end only
when W >= e ("incomplete windows never fire"). Sources without event time pass events through in arrival order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from deployer.local.events import DeadLetter, RunStats
from deployer.local.join import JoinOp
from deployer.local.output_rate import OutputRateOp
from deployer.local.patterns import PatternOp
from deployer.local.runtime import (
    Event,
    FilterOp,
    MapOp,
    MaterializeOp,
    MultiFilterOp,
    Operator,
    ReadSQLOp,
    SinkOp,
    UnionOp,
    UpdateSQLOp,
)
from deployer.local.windows import AggregateOp
from operators import graph as g
from operators.datatypes import TIMESTAMP
from operators.values import format_timestamp_iso, from_micros, to_micros


class SourceOp(Operator):
    node: g.Source

    def __init__(self, node: g.Source, rt: LocalExecutor):
        super().__init__(node, rt)
        self.executor = rt
        self.stream = node.stream
        self.width = len(node.schema)
        self.time_pos = node.schema.position(node.event_time) if node.event_time else None
        self.ts_fields = [i for i, f in enumerate(node.schema) if f.type.kind == TIMESTAMP]
        self.delay = (node.watermark_ms or 0) * 1000
        self.heap: list[tuple[int, int, Event]] = []
        self.seq = 0
        self.max_ts: int | None = None
        self.wm: int | None = None
        self.closed = False

    def push(self, event: Event) -> None:
        if self.closed:
            raise ValueError(f"stream '{self.stream}' has ended; no more events can be pushed")
        if len(event) != self.width:
            raise ValueError(
                f"stream '{self.stream}' has {self.width} fields, got an event with {len(event)}"
            )
        self.rt.stats.count_in(self.stream)
        event = self._utc(event)
        if self.time_pos is None:
            self.emit(event, None)
            return
        value = event[self.time_pos]
        if not isinstance(value, datetime):
            shown = "NULL" if value is None else repr(value)
            self.fail(f"event time field '{self.node.event_time}' is {shown}", event)
            return
        ts = to_micros(value)
        if self.wm is not None and ts < self.wm:
            self.executor.late(self, event, ts, self.wm)
            return
        heapq.heappush(self.heap, (ts, self.seq, event))
        self.seq += 1
        if self.max_ts is None or ts > self.max_ts:
            self.max_ts = ts
            self.advance(ts - self.delay)

    def _utc(self, event: Event) -> Event:
        """Timestamps are aware UTC values inside the graph; a naive one is taken as UTC."""
        fixed: list[Any] | None = None
        for i in self.ts_fields:
            v = event[i]
            if isinstance(v, datetime) and v.tzinfo is not UTC:
                if fixed is None:
                    fixed = list(event)
                fixed[i] = v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
        return event if fixed is None else tuple(fixed)

    def advance(self, wm: int) -> None:
        if self.time_pos is None or (self.wm is not None and wm <= self.wm):
            return
        self.wm = wm
        while self.heap and self.heap[0][0] < wm:
            ts, _, event = heapq.heappop(self.heap)
            self.emit(event, ts)
        self.emit_watermark(wm)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        while self.heap:
            ts, _, event = heapq.heappop(self.heap)
            self.emit(event, ts)
        # The final watermark stays max event time - WATERMARK, as on Spark, whose watermark does not
        # jump to the end of time when a bounded input is consumed: both engines fire the same windows.
        self.emit_end(self.wm if self.wm is not None else self.max_ts)


# The reference executor's operator for every node type of the graph (tests/architecture checks that
# every operator of operators.graph has one, as it checks the Spark translation's handlers).
OPERATORS: dict[type[g.Node], Callable[[Any, LocalExecutor], Operator]] = {
    g.Source: SourceOp,
    g.Map: MapOp,
    g.Filter: FilterOp,
    g.MultiFilter: MultiFilterOp,
    g.Union: UnionOp,
    g.Aggregate: AggregateOp,
    g.Join: JoinOp,
    g.ReadSQL: ReadSQLOp,
    g.UpdateSQL: UpdateSQLOp,
    g.Materialize: MaterializeOp,
    g.Pattern: PatternOp,
    g.OutputRate: OutputRateOp,
    g.Sink: SinkOp,
}


class LocalExecutor:
    """Runs a graph in-process. Outputs go to `on_output(stream, event)` if given, else `outputs`."""

    def __init__(
        self,
        graph: g.Graph,
        stores: Any | None = None,
        *,
        on_output: Callable[[str, Event], None] | None = None,
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
    ):
        self.graph = graph
        self.stores = stores
        self.stats = RunStats()
        self.outputs: dict[str, list[Event]] = {name: [] for name in graph.streams}
        self.dead_letters: list[DeadLetter] = []
        self._on_output = on_output
        self._on_dead_letter = on_dead_letter
        needs = [n for n in graph.nodes if isinstance(n, g.ReadSQL | g.UpdateSQL | g.Materialize)]
        if needs and stores is None:
            raise ValueError(
                f"the graph uses data stores (node {needs[0].id}, line {needs[0].line}); pass `stores`"
            )
        self.ops: dict[str, Operator] = {n.id: self._make(n) for n in graph.nodes}
        for n in graph.nodes:
            for i, port in enumerate(n.inputs):
                self.ops[port.node].outs[port.index].append((self.ops[n.id], i))
        for name, port in graph.streams.items():
            self.ops[port.node].taps[port.index].append(name)
        self.sources: dict[str, SourceOp] = {}
        for s in graph.sources():
            op = self.ops[s.id]
            assert isinstance(op, SourceOp)
            self.sources[s.stream.lower()] = op
        self.finished = False

    def _make(self, n: g.Node) -> Operator:
        return OPERATORS[type(n)](n, self)

    # ---- input -----------------------------------------------------------------------------------

    def source(self, stream: str) -> SourceOp:
        op = self.sources.get(stream.lower())
        if op is None:
            known = ", ".join(s.stream for s in self.graph.sources())
            raise KeyError(f"'{stream}' is not a source stream of the script; sources: {known}")
        return op

    def push(self, stream: str, event: Sequence[Any]) -> None:
        """One event, a tuple in the source schema's field order with typed values."""
        self.source(stream).push(tuple(event))

    def push_all(self, stream: str, events: Iterable[Sequence[Any]]) -> None:
        src = self.source(stream)
        for e in events:
            src.push(tuple(e))

    def advance_watermark(self, stream: str, until: datetime) -> None:
        """Promise that no event of `stream` with time < `until` will come (an idle source)."""
        self.source(stream).advance(to_micros(until))

    def end_stream(self, stream: str) -> None:
        """This source is over: release what it buffered; merges stop waiting for it."""
        self.source(stream).close()

    def finish(self) -> RunStats:
        """End every source (in graph order): flush buffers and fire every complete window."""
        if not self.finished:
            self.finished = True
            for op in self.sources.values():
                op.close()
        return self.stats

    def run(self, inputs: Mapping[str, Iterable[Sequence[Any]]]) -> dict[str, list[Event]]:
        """Push each stream's events (stream by stream, which is fine: merges are by event time), finish."""
        for stream, events in inputs.items():
            self.push_all(stream, events)
        self.finish()
        return self.outputs

    def reject(self, stream: str, reason: str, record: str | None = None, source: str | None = None) -> None:
        """A raw input record of `stream` that could not become an event (dead-lettered, counted)."""
        self.stats.count_dead("input")
        self._dead(DeadLetter("input", reason, self.source(stream).stream, record=record, source=source))

    # ---- Runtime protocol ------------------------------------------------------------------------

    def record(self, stream: str, event: Event) -> None:
        self.stats.count_out(stream)
        if self._on_output is not None:
            self._on_output(stream, event)
        else:
            self.outputs[stream].append(event)

    def fail(self, op: Operator, reason: str, event: Event | None) -> None:
        stage = op.node.op
        self.stats.count_dead(stage)
        stream = op.node.stream if isinstance(op.node, g.Source) else None
        self._dead(DeadLetter(stage, reason, stream, op.node.id, op.node.line, event))

    def late(self, op: SourceOp, event: Event, ts: int, wm: int) -> None:
        self.stats.count_late(op.stream)
        reason = (
            f"late: event time {format_timestamp_iso(from_micros(ts))} is behind the watermark "
            f"{format_timestamp_iso(from_micros(wm))} of stream '{op.stream}'"
        )
        self._dead(DeadLetter("late", reason, op.stream, op.node.id, op.node.line, event))

    def _dead(self, dl: DeadLetter) -> None:
        if self._on_dead_letter is not None:
            self._on_dead_letter(dl)
        else:
            self.dead_letters.append(dl)
