"""One run-time object per graph node: the event-at-a-time meaning of each operator.

Operators talk by three messages, always in this order on an edge: events, then a watermark that
promises no later event on that edge has an event time below it, then `end` (the input is over).
Streams with event time carry events in event-time order (ties in arrival order); streams without
it (e.g. Aggregate output) carry them in emission order. A Map, an Aggregate or a Pattern whose output
has no event-time field still passes on the time of its rows and its input's watermark, for the
OutputRate that may follow (deployer.local.output_rate: a limit ticks on event time whether or not
the SELECT keeps it); an operator without event time ignores both.

`Runtime` is what operators need from the executor: dead-lettering, counters, stores, stream taps.

Data store errors (stores/errors.py): one about the event's own data (a read raising it marked
`about_event`, or an UpdateResult or MaterializeResult reporting it) dead-letters the event; any
other one (a missing table, SQL the database refuses, the store unreachable after the retries, a
result column whose type changed since the script was compiled) propagates and stops the run, as it
stops the Spark query.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from typing import Any, Protocol

from deployer.evaluation.evaluate import EVAL_ERRORS, compile_expr, compile_predicate
from deployer.local.events import RunStats
from operators import graph as g
from operators.analysis import vouched_results
from operators.results import TypeChanged, column_count_reason, result_row
from operators.values import EvalError
from stores.errors import StoreError, StoreSchemaError

Event = tuple[Any, ...]

# Per-event failures that dead-letter the event instead of stopping the run. ArithmeticError covers
# decimal signals (e.g. an operation exceeding the 38-digit context).


def per_event(err: StoreError) -> StoreError:
    """`err` when it is about one event's data (a read of that event refused: it dead-letters the
    event); else it is raised, to stop the run."""
    if not err.about_event:
        raise err
    return err


class Runtime(Protocol):
    stats: RunStats
    stores: Any  # the data stores (stores.api.Stores), when the graph uses any

    def record(self, stream: str, event: Event) -> None: ...

    def fail(self, op: Operator, reason: str, event: Event | None) -> None: ...


class Operator:
    def __init__(self, node: g.Node, rt: Runtime):
        self.node = node
        self.rt = rt
        ports = max(node.outputs, 1)
        self.outs: list[list[tuple[Operator, int]]] = [[] for _ in range(ports)]
        self.taps: list[list[str]] = [[] for _ in range(ports)]
        self.ended = [False] * len(node.inputs)
        self.timed = node.event_time is not None

    # ---- sending ----
    def emit(self, event: Event, ts: int | None, port: int = 0) -> None:
        for name in self.taps[port]:
            self.rt.record(name, event)
        for op, i in self.outs[port]:
            op.event(i, event, ts)

    def emit_watermark(self, wm: int) -> None:
        for outs in self.outs:
            for op, i in outs:
                op.watermark(i, wm)

    def emit_end(self, final: int | None) -> None:
        for outs in self.outs:
            for op, i in outs:
                op.end(i, final)

    def fail(self, err: BaseException | str, event: Event | None) -> None:
        self.rt.fail(self, str(err) or type(err).__name__, event)

    # ---- receiving ----
    def event(self, i: int, event: Event, ts: int | None) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def watermark(self, i: int, wm: int) -> None:
        if self.timed:
            self.emit_watermark(wm)

    def end(self, i: int, final: int | None) -> None:
        self.ended[i] = True
        if all(self.ended):
            self.finish(final)
            self.emit_end(final)

    def finish(self, final: int | None) -> None:
        """The input is over: flush what may still be emitted (subclasses)."""


class MapOp(Operator):
    node: g.Map

    def __init__(self, node: g.Map, rt: Runtime):
        super().__init__(node, rt)
        self.fns = [compile_expr(p.expr) for p in node.projections]

    def event(self, i: int, event: Event, ts: int | None) -> None:
        try:
            out = tuple(f(event) for f in self.fns)
        except EVAL_ERRORS as err:
            self.fail(err, event)
            return
        self.emit(out, ts)  # the row's time, with or without a field for it (module docstring)

    def watermark(self, i: int, wm: int) -> None:
        self.emit_watermark(wm)


class FilterOp(Operator):
    node: g.Filter

    def __init__(self, node: g.Filter, rt: Runtime):
        super().__init__(node, rt)
        self.pred = compile_predicate(node.predicate)

    def event(self, i: int, event: Event, ts: int | None) -> None:
        try:
            keep = self.pred(event)
        except EVAL_ERRORS as err:
            self.fail(err, event)
            return
        if keep:
            self.emit(event, ts)
        else:
            self.rt.stats.count_filtered(self.node.id)


class MultiFilterOp(Operator):
    """One pass: every predicate is evaluated first, so an error dead-letters the event once."""

    node: g.MultiFilter

    def __init__(self, node: g.MultiFilter, rt: Runtime):
        super().__init__(node, rt)
        self.preds = [compile_predicate(p) for p in node.predicates]

    def event(self, i: int, event: Event, ts: int | None) -> None:
        try:
            hits = [p(event) for p in self.preds]
        except EVAL_ERRORS as err:
            self.fail(err, event)
            return
        if not any(hits):
            self.rt.stats.count_filtered(self.node.id)
        for port, hit in enumerate(hits):
            if hit:
                self.emit(event, ts, port)


class Merger:
    """Merges event-time-ordered inputs into one order: by event time, then input index, then arrival.

    An event is released once every input that has not ended has a watermark above its time, so
    the merged order does not depend on how the inputs' events interleaved on arrival.
    """

    def __init__(self, inputs: int, below_final: bool = False):
        self.heap: list[tuple[int, int, int, Event]] = []
        self.seq = 0
        self.wms: list[int | None] = [None] * inputs
        self.ended = [False] * inputs
        self.finals: list[int | None] = [None] * inputs
        # release only what every input's watermark, an ended one's final too, passed (a pattern over rows
        # out of time order: Spark's takes them so, with no end of input after a join; docs/language.md)
        self.below_final = below_final

    def set_watermark(self, i: int, wm: int) -> None:
        self.wms[i] = wm

    def end(self, i: int, final: int | None) -> None:
        """Input i is over; `final` is its final time."""
        self.ended[i] = True
        self.finals[i] = final

    def push(self, i: int, ts: int, event: Event) -> None:
        heapq.heappush(self.heap, (ts, i, self.seq, event))
        self.seq += 1

    def limit(self) -> float | None:
        """Events with time below this are final; inf when every input ended; None: none yet. With
        `below_final` an ended input holds the rest at its final watermark, as Spark's (seed 1412)."""
        live = [w for w, e in zip(self.wms, self.ended, strict=True) if not e]
        if not live:
            final = self.final if self.below_final else None
            return math.inf if final is None else final
        if any(w is None for w in live):
            return None
        ended = zip(self.finals, self.ended, strict=True) if self.below_final else zip((), (), strict=True)
        return min([*(w for w in live if w is not None), *(f for f, e in ended if e and f is not None)])

    def watermark(self) -> int | None:
        """The merge's watermark for what comes after it: the least of its inputs' watermarks, an
        input that ended holding at its final one (it has no later events, but a window after the
        merge must not close past it: found by the fuzzer, seed 38205, where an input that ended
        first let a TIME window fire at the other's watermark); an input that ended without events
        does not count. None while a live input has none yet."""
        marks: list[int] = []
        for w, ended, final in zip(self.wms, self.ended, self.finals, strict=True):
            if ended:
                if final is not None:
                    marks.append(final)
            elif w is None:
                return None
            else:
                marks.append(w)
        return min(marks) if marks else None

    def release(self) -> Iterator[tuple[int, int, Event]]:
        limit = self.limit()
        while limit is not None and self.heap and self.heap[0][0] < limit:
            ts, i, _, event = heapq.heappop(self.heap)
            yield i, ts, event

    @property
    def done(self) -> bool:
        return all(self.ended)

    @property
    def final(self) -> int | None:
        """At the end, the merge's final watermark: the least of its inputs' (those that had events),
        as Spark's watermark is the least of its streams'; a window the slower input has not passed
        does not fire (docs/language.md, "Incomplete windows never fire")."""
        known = [f for f in self.finals if f is not None]
        return min(known) if known else None


class MergedOperator(Operator):
    """An operator over several inputs merged into one event-time order (`Merger`): the Union, the
    Join, the Pattern. Each input's watermark and end go to the merge; what the merge releases goes
    to `merged`, in order; then `passed` learns the merge's watermark (`Merger.watermark`: None while
    an input has none yet), and once every input ended, `finish` ends the operator's output."""

    def __init__(self, node: g.Node, rt: Runtime):
        super().__init__(node, rt)
        self.merge = Merger(len(node.inputs))
        self.out_wm: int | None = None

    def event(self, i: int, event: Event, ts: int | None) -> None:
        assert ts is not None, f"the inputs of a {type(self.node).__name__} have event time"
        self.merge.push(i, ts, event)

    def watermark(self, i: int, wm: int) -> None:
        self.merge.set_watermark(i, wm)
        self._drain()

    def end(self, i: int, final: int | None) -> None:
        self.merge.end(i, final)
        self._drain()
        if self.merge.done:
            self.finish(self.merge.final)

    def _drain(self) -> None:
        for i, ts, event in self.merge.release():
            self.merged(i, ts, event)
        self.passed(self.merge.watermark())

    def forward_watermark(self, wm: int) -> None:
        """The output's watermark, when it moved forward."""
        if self.out_wm is None or wm > self.out_wm:
            self.out_wm = wm
            self.emit_watermark(wm)

    def merged(self, i: int, ts: int, event: Event) -> None:
        raise NotImplementedError

    def passed(self, limit: int | None) -> None:
        raise NotImplementedError

    def finish(self, final: int | None) -> None:
        """Every input ended; `final`: the merge's final watermark (Merger.final)."""
        self.emit_end(final)


class UnionOp(MergedOperator):
    node: g.Union

    def event(self, i: int, event: Event, ts: int | None) -> None:
        if not self.timed or ts is None:
            self.emit(event, None)  # no event time: arrival order
        else:
            self.merge.push(i, ts, event)

    def merged(self, i: int, ts: int, event: Event) -> None:
        self.emit(event, ts)

    def passed(self, limit: int | None) -> None:
        if self.timed and isinstance(limit, int):
            self.forward_watermark(limit)


class SinkOp(Operator):
    """Results are collected by stream taps on the producing port; nothing to do here."""

    def event(self, i: int, event: Event, ts: int | None) -> None:
        pass


class MaterializeOp(Operator):
    """Per event: store the row. A row the store refuses (a constraint, a bad value) is dead-lettered."""

    node: g.Materialize

    def __init__(self, node: g.Materialize, rt: Runtime):
        super().__init__(node, rt)
        self.stores = rt.stores
        self.columns = node.input_schema.names

    def event(self, i: int, event: Event, ts: int | None) -> None:
        # A row the store refuses comes back in the result; an error it raises is not one it could
        # pin on the row (Spark's batch fails on it too): it stops the run.
        result = self.stores.materialize(self.node.table, columns=self.columns, rows=[event])
        # A MaterializeResult (stores/api.py) says whether the store refused the row.
        errors = getattr(result, "errors", None)
        if errors and errors[0] is not None:
            self.fail(errors[0], event)
            return
        self.rt.stats.count_applied(self.node.table.name)


class ReadSQLOp(Operator):
    """Per event: bind the arguments, run the SELECT, emit input ++ row for every row it returns."""

    node: g.ReadSQL

    def __init__(self, node: g.ReadSQL, rt: Runtime):
        super().__init__(node, rt)
        self.stores = rt.stores
        self.args = [compile_expr(a) for a in node.args]
        self.names = [f.name for f in node.result_fields]
        self.types = [f.type for f in node.result_fields]
        self.vouched = vouched_results(node)
        self.nulls = (None,) * len(node.result_fields)

    def event(self, i: int, event: Event, ts: int | None) -> None:
        try:
            params = tuple(f(event) for f in self.args)
            rows = self.stores.read(self.node.query, [params])[0]
        except EVAL_ERRORS as err:
            self.fail(err, event)
            return
        except StoreError as err:
            self.fail(per_event(err), event)
            return
        # Every row is converted before the event is dead-lettered for one: a value that does not
        # fit a column the store vouched for stops the run wherever it is (as on Spark, which sees
        # the event's rows at once).
        out: list[Event] = []
        failure: BaseException | None = None
        for row in rows:
            try:
                out.append(event + self._typed(row))
            except EVAL_ERRORS as err:
                failure = failure or err
        if failure is not None:
            self.fail(failure, event)
            return
        if not out and self.node.outer:
            out = [event + self.nulls]
        for e in out:
            self.emit(e, ts if self.timed else None)

    def _typed(self, row: tuple[Any, ...]) -> Event:
        # The store returns driver values; each becomes a value of its field's type, or the event
        # is dead-lettered (operators.results: the rule the Spark translation applies too).
        query = self.node.query
        if len(row) != len(self.types):
            raise EvalError(column_count_reason(query.name, len(row), len(self.types)))
        try:
            return result_row(query.name, self.names, self.types, row, self.vouched)
        except TypeChanged as err:
            raise StoreSchemaError(str(err), store=query.store) from None


class UpdateSQLOp(Operator):
    """Per event, in event order: bind and execute; emit the input (++ the affected-row count).

    An event whose statement fails (the store reports it per event, e.g. a constraint) is
    dead-lettered; the reference executor has no deterministic event ids, so no ledger is used.
    """

    node: g.UpdateSQL

    def __init__(self, node: g.UpdateSQL, rt: Runtime):
        super().__init__(node, rt)
        self.stores = rt.stores
        self.args = [compile_expr(a) for a in node.args]

    def event(self, i: int, event: Event, ts: int | None) -> None:
        try:
            params = tuple(f(event) for f in self.args)
        except EVAL_ERRORS as err:
            self.fail(err, event)
            return
        # An event the database refuses comes back in the result (stores.api.UpdateResult); an error
        # the store raises is not one it could pin on the event, and stops the run, as on Spark.
        result = self.stores.update(self.node.query, [params])
        # An UpdateResult (stores/api.py); a plain list of counts from a simple test double.
        errors = getattr(result, "errors", None)
        if errors and errors[0] is not None:
            self.fail(errors[0], event)
            return
        count = result.counts[0] if hasattr(result, "counts") else result[0]
        self.emit((*event, count) if self.node.count_field else event, ts if self.timed else None)
