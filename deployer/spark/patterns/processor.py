"""The Pattern operator's stateful processor on Spark: the automaton of deployer.patterns, one key at
a time, with the key's state in the state store between micro-batches.

Per key, the state is one value: the key's whole automaton pickled (its partials, each event stored
once however many partials hold it: pickle writes a shared object once) and the one event-time timer
the key has, at its earliest deadline (an absence's, or a WITHIN's end). A micro-batch's events of a
key are taken in the merged order (event time, then the input's place in the pattern, then arrival),
each letting the key's own deadlines pass up to its time first; the timer lets the watermark pass the
deadlines of a key that has no later event. A key whose automaton is as new (nothing pending but an
unused EVERY start) is removed with its timer: keys that go quiet leave nothing behind.

When an input's rows come out of time order (`node.in_time_order`: a join's pairs, another pattern's
rows with PARTITION BY), a key's events wait in its state until the watermark passes them, then are
taken in the merged order, as the reference executor's merge takes them; the key's timer is then at
the earlier of its deadline and the watermark past its earliest waiting event. At the end of a
bounded input those the final watermark has not passed are not taken, on both engines
(docs/language.md, "Rows out of time order").

It is Spark's row-based `transformWithState`: the automaton takes an event at a time, so there is
nothing to vectorise, and a Row is a tuple of Python values already (a pandas frame per key cost a
conversion per key and per value: docs/architecture.md, "Patterns on Spark", has the figures).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from pyspark.sql import Row
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from deployer.patterns.matcher import KeyState
from deployer.patterns.runner import Emit, Fail, PatternRunner
from operators import graph as g
from operators.datatypes import Schema
from operators.values import from_micros, to_micros

_TICK = timedelta(microseconds=1)  # see deployer.spark.translate.ties

STATE_VERSION = 1  # the pickled state's layout: a change refuses an older checkpoint's state
FAIL = "__fail"  # why a row is a dead letter, NULL for a match's row
FAILED_EVENT = "__failed_event"  # ... and the event (or match row) it is about, as tagged text (JSON)
STATE = T.StructType(
    [
        T.StructField("version", T.IntegerType()),
        T.StructField("automaton", T.BinaryType()),
        T.StructField("timer", T.LongType()),
    ]
)


def encoded(values: tuple[Any, ...], schema: Schema) -> str:
    """Values as a dead letter carries them: the tagged text of deployer.spark.translate.columns
    `encoded_value`, as JSON, for the dead-letter writer to read back."""
    out: list[str | None] = []
    for v, f in zip(values, schema, strict=True):
        kind = f.type.kind
        if v is None:
            out.append(None)
        elif kind in ("integer", "bigint"):
            out.append(f"i{v}")
        elif kind == "double":
            out.append(f"f{v!r}")
        elif kind == "decimal":
            out.append(f"n{v}")
        elif kind == "boolean":
            out.append("btrue" if v else "bfalse")
        elif kind == "timestamp":
            out.append(f"t{to_micros(v)}")
        else:
            out.append(f"s{v}")
    return json.dumps(out)


# An event as the processor takes it: its time (µs), its input, its order key, its values.
Held = tuple[int, int, str, tuple[Any, ...]]


def _passed(events: list[Held], wm: int) -> tuple[list[Held], list[Held]]:
    """`events` in the merged order, split at the watermark: those before it, and those it has not
    passed yet, which wait (a pattern over rows out of time order: node.in_time_order)."""
    events.sort(key=lambda e: e[:3])
    cut = next((i for i, e in enumerate(events) if e[0] >= wm), len(events))
    return events[:cut], events[cut:]


def _timestamps(schema: Schema) -> list[int]:
    return [i for i, f in enumerate(schema) if f.type.kind == "timestamp"]


class PatternProcessor(StatefulProcessor):
    """See the module docstring. Input rows: `__inp`, `__t` (the event time, µs), `__seq`, then
    one struct per input (`__e<i>`, the event's fields, timestamps as µs). Output rows: the node's
    fields (`_0`...), `__seq` (the match's order key: deployer.patterns.runner), `FAIL`,
    `FAILED_EVENT`."""

    def __init__(
        self,
        node: g.Pattern,
        cap: int | None,
        out_names: list[str],
        events: list[str] | None = None,
        marked: bool = True,
        blank: dict[str, Any] | None = None,
    ) -> None:
        self.node = node
        self.cap = cap
        self.out_names = out_names
        # the input column of each input's event; a processor of the pattern sinks' shared query
        # (deployer.spark.patterns.shared) reads them elsewhere, its rows have other columns too
        # (`blank`, NULL), and no copy of the match time (`marked`: no operator reads its watermark)
        self.events = events or [f"__e{i}" for i in range(len(node.inputs))]
        self.blank = blank or {}
        self.width = len(node.schema)
        # with the match time selected, the last output column is it a microsecond on (translate)
        self.timed = node.schema.position(node.event_time) if node.event_time and marked else None
        self.stamps = [_timestamps(s) for s in node.input_schemas]

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.attach(handle, handle.getValueState("pattern", STATE))

    def attach(self, handle: StatefulProcessorHandle, state: Any) -> None:
        """Keep `handle` and the value state of its keys, `state`."""
        self.handle = handle
        self.state = state
        self.runner = PatternRunner(self.node, self.cap)
        self.row_schema = self.node.row_schema

    # ---- the key's state -----------------------------------------------------------------------

    def _load(self) -> tuple[KeyState, list[Held], int | None, bool]:
        """The key's automaton, the events it holds for the watermark, its timer, and whether the
        state store held it."""
        # every call on the state is a round trip to the JVM's state server: get() alone (None when
        # the key has no state), not exists() first
        stored = self.state.get()
        if stored is None:
            return self.runner.new_state(), [], None, False
        version, blob, timer = stored
        if version != STATE_VERSION:
            raise RuntimeError(
                f"the checkpoint keeps pattern state of layout {version}, this version reads {STATE_VERSION}: "
                "run the script on a new checkpoint"
            )
        loaded = pickle.loads(blob)
        # with events held for the watermark (node.in_time_order), the pair (automaton, held)
        key_state, held = loaded if isinstance(loaded, tuple) else (loaded, [])
        return key_state, held, timer, True

    def _save(self, key_state: KeyState, held: list[Held], old_timer: int | None, stored: bool) -> None:
        m = self.runner.matcher(key_state)
        if key_state.fresh(self.runner.program) and not held:
            if stored:  # a key met for the first time has nothing to clear
                self.state.clear()
            if old_timer is not None:
                self.handle.deleteTimer(old_timer)
            return
        # the automaton's deadline, or the watermark past the earliest held event
        due = [d for d in (m.next_deadline(), held[0][0] + 1 if held else None) if d is not None]
        # a timer at the first millisecond at or after it (µs): Spark fires it when its watermark
        # reaches it, and the automaton then decides what is at or before the watermark
        timer = -(-min(due) // 1000) if due else None
        if timer != old_timer:
            if old_timer is not None:
                self.handle.deleteTimer(old_timer)
            if timer is not None:
                self.handle.registerTimer(timer)
        kept: object = (key_state, held) if held else key_state
        blob = pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)
        self.state.update((STATE_VERSION, blob, timer))

    # ---- events and time ---------------------------------------------------------------------------

    def _event(self, row: Row) -> tuple[int, tuple[Any, ...]]:
        inp = row["__inp"]
        event = row[self.events[inp]]
        # the row-based API hands a struct over as a dict (field name to value), in field order
        values = list(event.values() if isinstance(event, dict) else event)
        for i in self.stamps[inp]:
            if values[i] is not None:
                values[i] = from_micros(values[i])
        return inp, tuple(values)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        key_state, held, timer, stored = self._load()
        events = [(r["__t"], r["__inp"], r["__seq"], self._event(r)[1]) for r in rows]
        if self.node.in_time_order:
            # rows out of time order: held until the watermark passes them (module docstring)
            events, held = _passed(held + events, timerValues.getCurrentWatermarkInMs() * 1000)
        else:
            events.sort(key=lambda e: e[:3])
        key_state, out = self._take(key_state, events)
        self._save(key_state, held, timer, stored)
        yield from out

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:
        key_state, held, timer, stored = self._load()
        wm = timerValues.getCurrentWatermarkInMs() * 1000
        events, held = _passed(held, wm)
        key_state, out = self._take(key_state, events)
        out += self._rows(self.runner.on_time(self.runner.matcher(key_state), wm))
        # the fired timer is gone: the next one is registered anew
        self._save(key_state, held, None if timer == expiredTimerInfo.getExpiryTimeInMs() else timer, stored)
        yield from out

    def _take(self, key_state: KeyState, events: list[Held]) -> tuple[KeyState, list[Row]]:
        """The key's automaton after `events`, in the merged order, and the rows they made."""
        m = self.runner.matcher(key_state)
        out: list[Row] = []
        for t, inp, seq, values in events:
            out += self._rows(self.runner.on_event(m, inp, values, t, seq))
            if key_state.fresh(self.runner.program):
                # as new: the reference executor forgets such a key after each event, and its next
                # event finds a new state; so must this one within the micro-batch (fuzzer seed 7905)
                key_state = self.runner.new_state()
                m = self.runner.matcher(key_state)
        return key_state, out

    def _rows(self, outs: list[Emit | Fail]) -> list[Row]:
        rows = []
        for o in outs:
            if isinstance(o, Emit):
                mark = () if self.timed is None else (o.values[self.timed] + _TICK,)
                rows.append(self._row((*o.values, o.order, None, None, *mark)))
                continue
            schema = self.row_schema if o.input is None else self.node.input_schemas[o.input]
            event = None if o.event is None else encoded(o.event, schema)
            failed = (*([None] * self.width), "", o.reason, event, *([] if self.timed is None else [None]))
            rows.append(self._row(failed))
        return rows

    def _row(self, values: tuple[Any, ...]) -> Row:
        own = dict(zip(self.out_names, values, strict=True))
        return Row(**({**self.blank, **own} if self.blank else own))

    def close(self) -> None:
        pass


class SharedPatternProcessor(StatefulProcessor):
    """The processors of several patterns in one operator keyed by (pattern, partition key), for the
    query pattern sinks share (deployer.spark.patterns.shared): each key's rows and timers go to its
    pattern's processor (`parts`, by the name in the key), over one value state. A key of a pattern
    no longer in the query (its statement removed from the script, which deployer.spark.run.compat
    allows) gets no rows: one with a deadline is dropped when its timer fires, one without stays in
    the state store, unread."""

    def __init__(self, parts: dict[str, PatternProcessor]) -> None:
        self.parts = parts

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("pattern", STATE)
        for processor in self.parts.values():
            processor.attach(handle, self.state)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        yield from self.parts[key[0]].handleInputRows(key, rows, timerValues)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:
        processor = self.parts.get(key[0])
        if processor is None:
            self.state.clear()
            return
        yield from processor.handleExpiredTimer(key, timerValues, expiredTimerInfo)

    def close(self) -> None:
        pass
