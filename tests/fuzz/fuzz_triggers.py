"""Triggers for the differential fuzzer (docs/language.md, "Triggers").

One case in five (and every case aimed at a `Trigger` line of the coverage table) declares one or
two triggers, each of any kind: `AT EVERY d` with periods from a quarter second to an hour in any
unit, many of which divide no window size (7 s, 13 s, 45 s, 1500 ms against 2 s windows); `AT
START`; a Quartz cron with seconds (`'*/20 * * * * ?'`, `'0 */7 * * * ?'`, `'0 0 * * * ?'`, a step
that does not divide the minute, a list, weekdays by name and by number). A trigger is a stream like
any other (`Stream.kind` "trigger"): every statement may read it, and three cases in four make one
read it first: a Map or Filter over `triggered_time`, a window, an `ON SQL` call (a read or an
update without parameters, or one that binds the tick: fuzz_queries), a Union with a stream of
events (the events' time as `triggered_time`, or the ticks shaped as the events), a join or a
pattern.

The case carries the clock its triggers tick on (`Case.trigger_clock`, CEP_TRIGGER_CLOCK=START/NOW):
the engines emit exactly the ticks in [START, NOW]. START falls before the inputs' events, among them
or after them (a trigger's event time merges with theirs), on a whole minute now and then (a cron
then fires at START itself); NOW - START is drawn so that no trigger ticks more than MAX_TICKS times,
now and then exactly on a tick of an EVERY (the range is closed).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from fuzz_coverage import TRIGGER_READERS, Row
from fuzz_exprs import BOOL, TS, category
from fuzz_inputs import T0, iso
from fuzz_statements import STATEMENTS, _alike, _union, _where, materialize_window
from fuzz_windows import DAY, HOUR, MINUTE, SECOND, duration
from hypothesis import strategies as st

if TYPE_CHECKING:
    from fuzz_scripts import Builder, Stream

# AT EVERY: periods (ms) from a quarter second to an hour; most divide none of fuzz_windows' sizes
EVERY_MS = [
    SECOND,
    250,
    1500,
    2500,
    3 * SECOND,
    7 * SECOND,
    13 * SECOND,
    45 * SECOND,
    MINUTE,
    7 * MINUTE,
    HOUR,
]
# AT 'cron' (Quartz, with seconds) -> the shortest time between two of its fire times (ms)
CRONS = {
    "*/20 * * * * ?": 20 * SECOND,
    "*/7 * * * * ?": 4 * SECOND,  # 0, 7, ..., 56, then 0 again four seconds later
    "0,10,25 * * * * ?": 10 * SECOND,
    "30 * * * * ?": MINUTE,
    "0 */7 * * * ?": 4 * MINUTE,
    "0 0 * * * ?": HOUR,
    "0 0 12 ? * MON-FRI": DAY,
    "0 0 12 ? * 2-6": DAY,  # the same days, numbered as Quartz numbers them (1 is Sunday)
}
KINDS = ("EVERY", "START", "cron")
MAX_TICKS = 100  # per trigger: a window, a join or a pattern over ticks costs with their number
# START from T0, where the inputs' events begin (fuzz_inputs: at T0 + 0, 5 or 10 s, then seconds to
# minutes apart, now and then an hour or a day later): among them, before them (ticks that end
# before the events begin, or run into them), after them.
STARTS = {
    "inside": [0, 2500, 7 * SECOND, 30 * SECOND, 90 * SECOND],
    "before": [-SECOND, -30 * SECOND, -2 * MINUTE, -HOUR],
    "after": [10 * MINUTE, HOUR + 500, DAY],
}
SPANS = [0, SECOND, 10 * SECOND, 30 * SECOND, MINUTE, 3 * MINUTE, 10 * MINUTE, HOUR, 6 * HOUR, DAY, 3 * DAY]
# What a read draws, per coverage line (fuzz_coverage.TRIGGER_READERS): statement kinds
READS = {
    "stateless": ("map", "filter", "multifilter"),
    "window": ("aggregate", "aggregate", "aggregate", "table"),
    "ON SQL": ("read", "write"),
    "join": ("join",),
    "pattern": ("pattern",),
}


def _declare(b: Builder, kind: str) -> tuple[int | None, int | None]:
    """A trigger of `kind`: (the shortest time between its ticks, its period when it is an EVERY);
    None for one that ticks once."""
    name = b.fresh("tr")
    if kind == "START":
        b.trigger(name, "START")
        return None, None
    if kind == "EVERY":
        ms: int = b.draw(st.sampled_from(EVERY_MS))
        b.trigger(name, f"EVERY {duration(b.draw, ms)}")
        return ms, ms
    cron: str = b.draw(st.sampled_from(sorted(CRONS)))
    b.trigger(name, f"'{cron}'")
    return CRONS[cron], None


def declare_triggers(b: Builder, target: Row | None) -> str | None:
    """One or two triggers, in one case in five or when `target` is a Trigger line (then one of its
    kind first); the clock they tick on (START/NOW), None when the case has none. Drawn so that
    shrinking goes toward no trigger, one, and fewer ticks."""
    wanted = target[0].removeprefix("Trigger ") if target and target[0].startswith("Trigger ") else None
    if wanted is None and b.draw(st.integers(0, 4)) < 4:
        return None
    kinds = [wanted] if wanted else []
    count = b.draw(st.integers(1, 2))
    while len(kinds) < count:
        kinds.append(b.draw(st.sampled_from(KINDS)))
    declared = [_declare(b, kind) for kind in kinds]
    return clock(b, [gap for gap, _ in declared], [every for _, every in declared if every])


def clock(b: Builder, gaps: list[int | None], periods: list[int]) -> str:
    """START/NOW for triggers whose ticks are at least `gaps` apart (None: one tick), and whose
    EVERYs have `periods`: no trigger ticks more than MAX_TICKS times."""
    fastest = min((gap for gap in gaps if gap), default=None)
    most = MAX_TICKS * fastest if fastest else 3 * DAY
    place = b.draw(st.sampled_from(list(STARTS)))
    start = T0 + timedelta(milliseconds=b.draw(st.sampled_from(STARTS[place])))
    span: int = b.draw(st.sampled_from([s for s in SPANS if s <= most]))
    if periods and b.draw(st.integers(0, 2)) == 2:
        period = b.draw(st.sampled_from(periods))
        if period <= most:  # NOW on a tick: the range holds both its ends
            span = period * b.draw(st.integers(1, most // period))
    return f"{iso(start)}/{iso(start + timedelta(milliseconds=span))}"


def _triggers(b: Builder) -> list[Stream]:
    return [s for s in b.streams.values() if s.kind == "trigger"]


def _events(s: Stream) -> bool:
    return s.event_time is not None and s.kind != "trigger"


def _shaped(b: Builder, trig: Stream, other: Stream) -> str:
    """A Map over the ticks with the schema of `other` (a stream of events): its event time the
    tick's, each other field NULL or an expression over the tick (which may fail on some)."""
    items = []
    for name, kind, precision, scale in other.fields:
        cat = category(kind)
        if name == other.event_time:
            items.append(f"triggered_time AS {name}")
        elif cat is None:  # a field of NULL's type: a bare NULL has it
            items.append(f"NULL AS {name}")
        else:
            typed = f"decimal({precision}, {scale or 0})" if kind == "decimal" else kind
            value = "NULL" if b.draw(st.integers(0, 2)) == 0 else b.at(cat, trig.scope(), 1, "SELECT")
            # a boolean or a timestamp has one type; a number or a text is cast to the field's exactly
            if value == "NULL" or cat not in (BOOL, TS):
                value = f"CAST({value} AS {typed})"
            items.append(f"{value} AS {name}")
    return f"SELECT {', '.join(items)} FROM {trig.name}"


def merge_ticks(b: Builder, trig: Stream) -> bool:
    """A Union of the ticks and a stream of events, one of them made the other's schema: the events'
    time as `triggered_time` (with a WHERE now and then), or the ticks shaped as the events; either
    first in FROM (equal times are merged in FROM order)."""
    if not any(_events(s) for s in b.streams.values()):
        return False
    other = b.pick(_events)
    out = b.fresh("m")
    if b.draw(st.booleans()):
        select = f"SELECT {other.event_time} AS triggered_time FROM {other.name}{_where(b, other, 3)}"
        b.add(f"INSERT INTO {out} {select}", {out: other.order}, [other.name], "map")
        pair = [trig, b.streams[out]]
    else:
        b.add(f"INSERT INTO {out} {_shaped(b, trig, other)}", {out: trig.order}, [trig.name], "map")
        pair = [other, b.streams[out]]
    if b.draw(st.booleans()):
        pair.reverse()
    if not _alike(*pair):  # a generator's slip: the Map is still a read of the ticks
        return True
    _union(b, *pair)
    return True


def read_ticks(b: Builder, reader: str, trig: Stream) -> bool:
    """A statement of the `reader` kind (fuzz_coverage.TRIGGER_READERS) over the ticks of `trig`;
    False when the case cannot have one (an `ON SQL` call without a data store ...)."""
    if reader == "merge":
        return merge_ticks(b, trig)
    kind = b.draw(st.sampled_from(READS[reader]))
    if kind == "table":
        return bool(b.store) and materialize_window(b, trig)
    b.next_input = trig.name
    try:
        return bool(STATEMENTS[kind](b))
    finally:
        b.next_input = None


def first_read(b: Builder) -> None:
    """In three cases in four with triggers, a statement that reads one first (others may later,
    as any stream): else a trigger could go unread in most cases that have one."""
    triggers = _triggers(b)
    if triggers and b.draw(st.integers(0, 3)) > 0:
        trig = b.draw(st.sampled_from(triggers))
        if not read_ticks(b, b.draw(st.sampled_from(TRIGGER_READERS)), trig):
            read_ticks(b, "stateless", trig)


def aim_trigger(b: Builder, target: Row) -> bool:
    """The statement that puts a Trigger line (fuzz_coverage.TRIGGER_ROWS) in the case, over a
    trigger of its kind (declare_triggers made one)."""
    kind = target[0].removeprefix("Trigger ")
    mine = [s for s in _triggers(b) if _kind_of(b, s.name) == kind]
    return bool(mine) and read_ticks(b, target[1], mine[0])


def _kind_of(b: Builder, name: str) -> str:
    decl = next(d for d in b.decls if d.startswith(f"CREATE TRIGGER {name} AT "))
    at = decl.removeprefix(f"CREATE TRIGGER {name} AT ")
    return "START" if at == "START" else "EVERY" if at.startswith("EVERY") else "cron"
