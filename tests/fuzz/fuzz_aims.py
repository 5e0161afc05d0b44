"""Aiming a case at one line of the coverage table (fuzz_coverage): an operator, the kind of statement
it reads and the place where an expression of it fails on some events.

A soak aims its cases at the lines with a zero (coverage-guided): the case first makes a stream of the
wanted kind (a Map, a join, a data store call ... over a source), then the operator over it, with an
expression that fails on some events drawn at the position (fuzz_exprs.failing), then goes on
drawing statements as any case does. Whether the expression fails on an event that reaches it is the
inputs' to say; the table counts only what did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fuzz_coverage import GROUPED, HOLDING, IN_AGGREGATION, IN_PROCESSOR, MERGING, RELEASED, SHARING, Row
from fuzz_statements import STATEMENTS, materialize_stream, materialize_window, union_of, union_of_sources
from fuzz_triggers import aim_trigger
from hypothesis import strategies as st

if TYPE_CHECKING:
    from fuzz_scripts import Builder, Stream

OPERATOR_KIND = {
    "Filter": "filter",
    "MultiFilter": "multifilter",
    "Map": "map",
    "Aggregate TIME": "aggregate",
    "Aggregate TUPLE": "aggregate",
    "Aggregate BATCH": "aggregate",
    "Join": "join",
    "ReadSQL": "read",
    "UpdateSQL": "write",
    "Pattern": "pattern",
}
TIMED_OPERATORS = ("Aggregate TIME", "Join", "Pattern")
# what gives the same rows in any input order: it may read a Union without event time (one that
# depends on order reads a Union with event time: fuzz_scripts.Stream.merged)
ORDER_FREE_OPERATORS = ("Map", "Filter", "MultiFilter", "ReadSQL", "Union")


def needs_store(target: Row) -> str | None:
    """The store kind a target needs: a data store call or a table, on either side; a ReadSQL that
    fails on its event's parameters needs PostgreSQL (SQLite refuses none of them)."""
    op, up, pos = target
    if op.startswith("Trigger "):  # a trigger read by a data store call (fuzz_triggers)
        return "any" if up == "ON SQL" else None
    if op == "ReadSQL" and pos == "ON SQL":
        return "postgresql"
    if op in ("ReadSQL", "UpdateSQL", "Materialize") or up in ("read", "write"):
        return "any"
    return None


def _upstream(b: Builder, up: str, timed: bool) -> Stream | None:
    """A stream made by a statement of kind `up` (with event time when `timed`), made now if there
    is none."""

    def fits(s: Stream) -> bool:
        return s.kind == up and (s.event_time is not None or not timed)

    found = [s for s in b.streams.values() if fits(s)]
    if found:
        return found[-1]
    if up == "source":
        return None
    if timed:
        b.next_input = next((s.name for s in b.streams.values() if s.source and s.event_time), None)
        if b.next_input is None:
            return None
    b.force = "-"  # no position: the statements made for it draw nothing meant to fail
    try:
        made = STATEMENTS["twins" if up == "union" and b.draw(st.booleans()) else up](b)
    finally:
        b.next_input = b.force = None
    found = [s for s in b.streams.values() if fits(s)]
    return found[-1] if made and found else None


def aim_output(b: Builder, target: Row) -> bool:
    """An OUTPUT clause of the target's form (fuzz_coverage.OUTPUT_ROWS) on a statement of its kind
    over a source (one with event time when the form or the statement needs it)."""
    op, up, _ = target
    timed = not op.endswith(" EVENTS") or up in ("pattern", "join")
    sources = [s for s in b.streams.values() if s.source and (s.event_time or not timed)]
    if not sources:
        return False
    kind = b.draw(st.sampled_from(["map", "filter"])) if up == "stateless" else up
    if up == IN_PROCESSOR:  # a TUPLE or BATCH window's (without HAVING: fuzz_statements)
        kind, b.window_kind = "aggregate", b.draw(st.sampled_from(["tuple", "batch"]))
    elif up == IN_AGGREGATION:  # a TIME window's (the same)
        kind, b.window_kind = "aggregate", "time"
    elif up == "aggregate" and op in ("OutputRate ALL EVERY duration", "OutputRate LAST EVERY duration"):
        b.window_kind = "time"  # over a TUPLE or BATCH window it may be the line above
    b.next_input, b.output = b.draw(st.sampled_from(sources)).name, target
    try:
        return bool(STATEMENTS[kind](b))
    finally:
        b.next_input = b.output = b.window_kind = None


def aim_holding(b: Builder, how: str, merged: bool = False) -> bool:
    """A source with a WATERMARK delay read by a TIME window (fuzz_coverage.HOLDING_ROWS), or with
    `merged` the Union of two sources with event time (MERGING_ROWS): `unheld`, by the window alone
    (what the case draws after may still read it where its order shows); `held`, by a Map too.
    False when the sources drawn have no such stream."""
    delayed = [name for name, s in b.streams.items() if s.source and s.delayed]
    if merged:
        union = union_of_sources(b)
        delayed = [] if union is None else [union]
    if not delayed:
        return False
    readers = ["aggregate"] + (["map"] if how == "held" else [])
    for kind in readers:
        b.next_input, b.force = delayed[0], "-"
        b.window_kind = "time" if kind == "aggregate" else None
        try:
            if not STATEMENTS[kind](b):
                return False
        finally:
            b.next_input = b.force = b.window_kind = None
    return True


def aim_sharing(b: Builder, how: str) -> bool:
    """The sink of a pattern over one source stream with event time (fuzz_coverage.SHARING_ROWS),
    `alone`, or `beside others`: two such patterns over the same stream (whether a statement drawn
    after reads them, so that they are no sinks, is the case's to say). False without such a
    stream."""
    timed = [name for name, s in b.streams.items() if s.source and s.event_time is not None]
    if not timed:
        return False
    for _ in range(1 if how == "alone" else 2):
        b.next_input, b.single_input = timed[0], True
        try:
            if not STATEMENTS["pattern"](b):
                return False
        finally:
            b.next_input, b.single_input = None, False
    return True


def aim_released(b: Builder, how: str) -> bool:
    """A SELECT that drops the event time of a source with a WATERMARK delay, then what takes its rows
    in the order the stream released them (fuzz_coverage.RELEASED_ROWS): a TUPLE or BATCH window, or
    a SELECT over them with an OUTPUT limit by count. False when the sources drawn have no such
    stream."""
    delayed = [name for name, s in b.streams.items() if s.source and s.delayed]
    if not delayed:
        return False
    b.next_input, b.drop_time, b.force = delayed[0], True, "-"
    try:
        if not STATEMENTS["map"](b):
            return False
    finally:
        b.next_input, b.drop_time, b.force = None, False, None
    dropped = list(b.streams)[-1]
    b.next_input = dropped
    if how == "OUTPUT limit":
        form = b.draw(st.sampled_from(["ALL", "FIRST", "LAST"]))
        b.output = (f"OutputRate {form} EVERY n EVENTS", "stateless", b.draw(st.sampled_from(["-", GROUPED])))
    else:
        b.window_kind = b.draw(st.sampled_from(["tuple", "batch"]))
    try:
        return bool(STATEMENTS["map" if how == "OUTPUT limit" else "aggregate"](b))
    finally:
        b.next_input = b.output = b.window_kind = None


def aim(b: Builder, target: Row) -> bool:
    """Make the statements that put `target` in the case; False when the sources drawn cannot (a
    TIME window over a stream without event time ...)."""
    op, up, pos = target
    if op.startswith("OutputRate"):
        return aim_output(b, target)
    if op.startswith("Trigger "):
        return aim_trigger(b, target)
    if op in (HOLDING, MERGING):
        return aim_holding(b, up, merged=op == MERGING)
    if op == SHARING:
        return aim_sharing(b, up)
    if op == RELEASED:
        return aim_released(b, up)
    s = _upstream(b, up, op in TIMED_OPERATORS or (up == "union" and op not in ORDER_FREE_OPERATORS))
    if s is None:
        return False
    b.next_input, b.force = s.name, pos
    b.window_kind = op.split()[1].lower() if op.startswith("Aggregate") else None
    try:
        if op == "Union":
            return union_of(b, s)
        if op == "Materialize":
            if not b.store:
                return False
            if up == "aggregate":
                return materialize_window(b, s)
            return materialize_stream(b, s)
        return bool(STATEMENTS[OPERATOR_KIND[op]](b))
    finally:
        b.next_input = b.force = b.window_kind = None
