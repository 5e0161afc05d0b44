"""OUTPUT clauses for the differential fuzzer (docs/language.md, "Output rate limiting").

One statement in four of those that can have one — a Map, a Filter, a data store call, a windowed
aggregate, a pattern, a join — ends with an OUTPUT clause: `ALL` (written out or left as the
default), `FIRST` or `LAST`, `EVERY n EVENTS` (n from 1 to 5) or, when the statement has event
time, `EVERY duration`, in any unit (durations that make ticks happen with the inputs' spacing:
fuzz_inputs.STEPS), and `SNAPSHOT EVERY duration` after a windowed aggregate. A Map or Filter with an
OUTPUT clause has a GROUP BY now and then (`k` or an expression over its input, which may fail on
some events), and so has a pattern (over what it matched: `e1.k`, `e2[last].v`); the limit then
applies per group, and an aggregate's own GROUP BY is its limiter's.

What the Builder learns of a limited statement's output: its schema and event time as compiled (ALL,
LAST and SNAPSHOT leave none, so that no later statement draws a TIME window, a join or a pattern
over it; FIRST keeps the statement's), and its order: the whole stream (`[]`), the limiter being one
ordered operator on both engines, whatever the statement's own order was.

A case aimed at one of the coverage table's OutputRate lines (fuzz_coverage.OUTPUT_ROWS) sets
`Builder.output` to it: the statement then has that form, with or without a GROUP BY as the line
says (fuzz_aims.aim_output).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fuzz_coverage import GROUPED
from fuzz_exprs import BOOL, INT, STR, Field
from fuzz_windows import HOUR, MINUTE, SECOND, UNITS, duration
from hypothesis import strategies as st

if TYPE_CHECKING:
    from fuzz_scripts import Builder, Stream

# EVERY duration: ticks k·T on the epoch; the inputs' events are 0 to 60 s apart (now and then an
# hour or a day), so periods from half a second to a minute tick within most inputs
EVERY_MS = [500, SECOND, SECOND, 1500, 2 * SECOND, 5 * SECOND, 5 * SECOND, 10 * SECOND, 30 * SECOND, MINUTE]
# A snapshot sends every live group at every tick: over a TUPLE or BATCH window (which nothing
# expires) or a TIME window of an hour or more, a short period over an input that jumps a day would
# send hundreds of thousands of rows; such windows get periods of a minute or more.
SLOW_MS = [MINUTE, MINUTE, 10 * MINUTE, HOUR]
KINDS = ("ALL", "FIRST", "LAST")
NO_LIMIT = "-"  # Builder.force for a stream made for another statement: it keeps its event time


def _aim(b: Builder) -> tuple[str, str] | None:
    """The (kind, unit) of the OutputRate line the case aims at: ("LAST", "TIME"), ("SNAPSHOT", "TIME")."""
    if b.output is None:
        return None
    form = b.output[0].removeprefix("OutputRate ")
    return form.split()[0], "EVENTS" if form.endswith(" EVENTS") else "TIME"


def grouping(b: Builder) -> bool | None:
    """Whether an aimed statement must have a GROUP BY (True), must not (False); None: not aimed."""
    return None if b.output is None else b.output[2] == GROUPED


def _draws(b: Builder) -> bool:
    if b.output is not None:
        return True
    # nor on a pattern aimed at the sinks patterns share (fuzz_aims.aim_sharing): its rows go on to
    # the limit then, not to a sink
    return b.force != NO_LIMIT and not b.single_input and b.draw(st.integers(0, 3)) == 0


def clause(b: Builder, timed: bool, window: str | None = None) -> str:
    """` OUTPUT ...`: `timed` whether the statement has event time (a time limit ticks on it),
    `window` a windowed aggregate's window spec (SNAPSHOT is drawn only then)."""
    forms = [(k, "EVENTS") for k in KINDS]
    if timed:
        forms += [(k, "TIME") for k in KINDS]
        if window is not None:
            forms.append(("SNAPSHOT", "TIME"))
    aimed = _aim(b)
    kind, unit = aimed if aimed in forms else b.draw(st.sampled_from(forms))
    if unit == "EVENTS":
        every = f"{b.draw(st.integers(1, 5))} EVENTS"
    else:
        slow = kind == "SNAPSHOT" and _slow(window or "")
        every = duration(b.draw, b.draw(st.sampled_from(SLOW_MS if slow else EVERY_MS)))
    if kind == "ALL" and b.draw(st.booleans()):
        return f" OUTPUT EVERY {every}"  # ALL is the default
    return f" OUTPUT {kind} EVERY {every}"


def _slow(spec: str) -> bool:
    """Whether a window keeps its groups live for long: a TUPLE or BATCH window, or a TIME window of
    an hour or more."""
    m = re.match(r"TIME SIZE (\d+) (\w+)", spec)
    if m is None:
        return True
    unit = next(ms for ms, names in UNITS if m.group(2) in names)
    return int(m.group(1)) * unit >= HOUR


def window_spec(b: Builder, template: str) -> str | None:
    """The spec of the window an aggregate's template reads (in place or declared by name)."""
    m = re.search(r" WINDOW (\w+)", template)
    if m is None:
        return None
    name = m.group(1)
    return b.windows.get(name, template[m.start(1) :])


def _keys(b: Builder, scope: list[Field], exprs: bool) -> str:
    """` GROUP BY ...` over `scope`: `k` (or a field that names it), another field, or (`exprs`)
    an expression, which may fail on some events."""
    keyed = [f.ref for f in scope if f.cat == INT and f.ref.split(".")[-1] == "k"]
    keys = []
    if keyed and b.draw(st.integers(0, 2)) > 0:
        keys.append(b.draw(st.sampled_from(keyed)))
    if not keys or b.draw(st.integers(0, 3)) == 0:
        if exprs:
            keys.append(b.at(b.draw(st.sampled_from([INT, STR, BOOL])), scope, 1, "GROUP BY"))
        else:
            keys.append(b.draw(st.sampled_from(scope)).ref)
    return f" GROUP BY {', '.join(dict.fromkeys(keys))}"


def _group(b: Builder, scope: list[Field], can: bool = True, exprs: bool = True) -> str:
    want = grouping(b)
    if not can or want is False or not scope:
        return ""
    return _keys(b, scope, exprs) if want or b.draw(st.integers(0, 2)) == 0 else ""


def limit(
    b: Builder, s: Stream, kind: str, template: str, order: list[str] | None
) -> tuple[str, list[str] | None]:
    """A one-input statement's template (fuzz_statements.ONE_INPUT) with an OUTPUT clause now and
    then, and the order of its output. A GROUP BY cannot follow an `ON SQL` (it comes before it)."""
    if s.merged or not _draws(b):  # which rows a limit keeps depends on order (Stream.merged)
        return template, order
    spec = window_spec(b, template) if kind == "aggregate" else None
    # rows out of time order that an update or a TUPLE or BATCH window reads in time order lose their
    # event time on the way (cpl.plan_order): no limit by time then
    reordered = s.unordered and (kind == "write" or (spec is not None and not spec.startswith("TIME")))
    timed = s.event_time is not None and not reordered
    if kind == "aggregate":
        return template + clause(b, timed, spec), []
    group = _group(b, s.scope(), can=kind in ("map", "filter"))
    return template + group + clause(b, timed), []


def limit_pattern(b: Builder, fields: list[Field], order: list[str] | None) -> tuple[str, list[str] | None]:
    """After a pattern's WHERE: a GROUP BY over what it matched now and then, and an OUTPUT clause
    (a pattern has event time, its match time, whether or not it selects it)."""
    if not _draws(b):
        return "", order
    # fields only: a pattern's failures are traced to its conditions, WHERE and SELECT (fuzz_coverage)
    plain = [f for f in fields if "(" not in f.ref]
    return _group(b, plain, exprs=False) + clause(b, True), []


def limit_join(b: Builder, template: str, order: list[str] | None) -> tuple[str, list[str] | None]:
    """A join's template with an OUTPUT clause now and then: its output's time is the left event
    time it selects (fuzz_statements.join_select selects it), and a join has no GROUP BY."""
    if not _draws(b):
        return template, order
    return template + clause(b, True), []
