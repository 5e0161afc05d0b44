"""The fuzzer's generator draws triggers (docs/language.md, "Triggers"; tests/fuzz/fuzz_triggers.py):
every kind, read by every kind of statement, under a clock that the case carries whenever it has a
trigger and that keeps the ticks few. Generation only, no engine run, so that a form the generator
stops drawing fails here, not silently in a soak that no longer meets it. Every script it draws
compiles (the generator compiles each statement as it goes and raises GeneratorError otherwise)."""

from __future__ import annotations

import re
from datetime import timedelta

from fuzz_case import Case
from fuzz_coverage import TRIGGER_ROWS, Coverage, Row
from fuzz_draws import drawn_cases
from fuzz_inputs import T0
from fuzz_triggers import CRONS, MAX_TICKS

from cpl.compiler import compile_script
from deployer.triggers.clock import parse
from operators import graph as g
from operators.values import to_micros

# what each form looks like in a drawn script
FORMS = {
    "START": r"^CREATE TRIGGER tr\d+ AT START;$",
    "EVERY in ms": r"^CREATE TRIGGER tr\d+ AT EVERY \d+ (ms|MILLISECONDS?);$",
    "EVERY in seconds": r"^CREATE TRIGGER tr\d+ AT EVERY \d+ (sec|SECONDS?);$",
    "EVERY in minutes": r"^CREATE TRIGGER tr\d+ AT EVERY \d+ (min|MINUTES?);$",
    "EVERY 7 s (divides no window)": r"AT EVERY (7 (sec|SECONDS?)|7000 (ms|MILLISECONDS?));$",
    "EVERY 1500 ms": r"AT EVERY 1500 (ms|MILLISECONDS?);$",
    "two triggers": r"CREATE TRIGGER tr\d+ AT .*\nCREATE TRIGGER tr\d+ AT ",
    "a Map over triggered_time": r"INSERT INTO m\d+ SELECT .*triggered_time.* FROM tr\d+",
    "a WHERE over triggered_time": r"FROM tr\d+ WHERE .*triggered_time",
    "a TIME window": r"FROM tr\d+ WINDOW (w\d+|TIME )",
    "a TUPLE window": r"FROM tr\d+ WINDOW (w\d+|TUPLE )",
    "a read without parameters": r"FROM tr\d+ .*ON (OUTER )?SQL (all_keys|how_many), p, r\d+",
    "an update without parameters": r"FROM tr\d+ .*ON SQL bump, x, n\d+",
    "an update that binds the tick": r"FROM tr\d+ .*ON SQL stamp, x, triggered_time",
    "the events as ticks": r"SELECT \w+ AS triggered_time FROM ",
    "the ticks as events": r"SELECT .*triggered_time AS ts.* FROM tr\d+;",
    "a union with a trigger": r"SELECT \* FROM (tr\d+, \w+|\w+, tr\d+);",
    "a join over ticks": r"FROM tr\d+ AS l WINDOW ",
    "a pattern over ticks": r"FROM (PATTERN|SEQUENCE) .*=tr\d+",
}


def _drawn(n: int, targets: tuple[Row, ...], first_seed: int = 51000) -> list[Case]:
    return drawn_cases(n, targets, first_seed=first_seed)


def _triggers(c: Case) -> list[g.Source]:
    graph = compile_script(c.script).graph
    return [n for n in graph.nodes if isinstance(n, g.Source) and n.trigger is not None]


def test_aimed_cases_draw_every_kind_read_by_every_statement() -> None:
    drawn = _drawn(3 * len(TRIGGER_ROWS), TRIGGER_ROWS)
    cov = Coverage()
    for c in drawn:
        cov.add(c.script, [], silent=False)
    never = [r for r in TRIGGER_ROWS if cov.had[r] == 0]
    assert not never, f"coverage lines never drawn: {never}"
    assert all(c.trigger_clock for c in drawn)
    scripts = "\n".join(c.script for c in drawn)
    missing = [name for name, rx in FORMS.items() if not re.search(rx, scripts, re.MULTILINE)]
    assert not missing, f"forms never drawn: {missing}"
    crons = {cron for cron in CRONS if f"AT '{cron}';" in scripts}
    assert len(crons) >= len(CRONS) - 2, f"cron expressions drawn: {crons}"


def test_cases_not_aimed_draw_triggers_now_and_then_and_read_them() -> None:
    drawn = _drawn(150, (), first_seed=52000)
    with_triggers = [c for c in drawn if _triggers(c)]
    assert 0.08 * len(drawn) <= len(with_triggers) <= 0.35 * len(drawn), (
        f"{len(with_triggers)} of {len(drawn)}"
    )
    cov = Coverage()
    for c in with_triggers:
        cov.add(c.script, [], silent=False)
    readers = {up for (op, up, _), n in cov.had.items() if op.startswith("Trigger ") and n}
    assert {"stateless", "window", "merge"} <= readers, readers


def test_a_case_has_a_clock_exactly_when_it_has_a_trigger_and_few_ticks() -> None:
    """START falls before, among and after the inputs' events (which begin at T0 and go on for some
    minutes), and no trigger ticks more than MAX_TICKS times (a cron once more: both ends count)."""
    drawn = _drawn(60, TRIGGER_ROWS[:6], first_seed=53000) + _drawn(45, (), first_seed=54000)
    places = set()
    for c in drawn:
        sources = _triggers(c)
        assert bool(sources) == (c.trigger_clock is not None), c.script
        if c.trigger_clock is None:
            continue
        fixed = parse(c.trigger_clock).fixed
        assert fixed is not None
        start, now = fixed
        for s in sources:
            assert s.trigger is not None
            ticks = len(list(s.trigger.ticks(start, None, now, 10 * MAX_TICKS)))
            assert ticks <= MAX_TICKS + 1, (s.trigger, c.trigger_clock, ticks)
        t0 = to_micros(T0) // 1000
        places.add("before" if start < t0 else "inside" if start <= t0 + 90_000 else "after")
        assert now - start <= timedelta(days=3).total_seconds() * 1000
    assert places == {"before", "inside", "after"}, places
