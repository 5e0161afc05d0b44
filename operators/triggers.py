"""Triggers (`CREATE TRIGGER name AT EVERY d | AT START | AT 'cron'`): when a trigger ticks.

A trigger is a source stream whose events the engine makes: one per tick, with one field,
`triggered_time`, the tick's scheduled time (docs/language.md, "Triggers"). Both engines ask this
module for the ticks, so they tick alike; what "now" is belongs to the engine's clock
(deployer.triggers.clock), and the start is when the deployment first started (kept with its
checkpoint on Spark, so that a restart goes on with the same schedule).

- `AT START`: one tick, at the start.
- `AT EVERY d`: at start + d, start + 2d, … (Siddhi: the first event one period after the start).
- `AT 'cron'`: Quartz cron with seconds (`sec min hour day-of-month month day-of-week [year]`), read
  by croniter; every fire time at or after the start, in UTC. Quartz numbers the days of the week
  1 (Sunday) to 7, croniter 0 to 6: `quartz_to_croniter` moves the numbers, names stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from operators.datatypes import T_TIMESTAMP, Field, Schema
from operators.declarations import format_ms

TRIGGERED_TIME = "triggered_time"
TRIGGER_SCHEMA = Schema((Field(TRIGGERED_TIME, T_TIMESTAMP),))


@dataclass(frozen=True)
class Trigger:
    """When a trigger ticks: `kind` is "start", "every" (every `every_ms`) or "cron" (`cron`)."""

    kind: str
    every_ms: int = 0
    cron: str = ""

    def describe(self) -> str:
        if self.kind == "every":
            return f"AT EVERY {format_ms(self.every_ms)}"
        if self.kind == "cron":
            return "AT '" + self.cron.replace("'", "''") + "'"
        return "AT START"

    def ticks(self, start_ms: int, previous_ms: int | None, now_ms: int, most: int) -> Iterator[int]:
        """The ticks after `previous_ms` due by `now_ms`, at most `most` of them, in order."""
        for n, tick in enumerate(self._schedule(start_ms, previous_ms)):
            if n >= most or tick > now_ms:
                return
            yield tick

    def _schedule(self, start_ms: int, previous_ms: int | None) -> Iterator[int]:
        """Every tick after `previous_ms` (from the first one when None), without end but AT START's."""
        if self.kind == "start":
            if previous_ms is None:
                yield start_ms
            return
        if self.kind == "every":
            tick = start_ms if previous_ms is None else previous_ms
            while True:
                tick += self.every_ms
                yield tick
        # one croniter for the lot (making one per tick parses the expression each time); it looks
        # strictly after the instant it is given, at whole seconds: 1 ms before the start finds a
        # fire time at the start itself
        from croniter import croniter  # here: every module with the graph imports this one

        after = start_ms - 1 if previous_ms is None else previous_ms
        it = croniter(quartz_to_croniter(self.cron), after / 1000, second_at_beginning=True)
        while True:
            yield round(it.get_next(float) * 1000)


_DOW_NUMBER = re.compile(r"(?<![#\d])(\d+)")


def quartz_to_croniter(expr: str) -> str:
    """A Quartz cron expression as croniter reads it: the day-of-week numbers 1-7 (Sunday first)
    moved to 0-6; ValueError naming the field when one is out of range."""
    fields = expr.split()
    if len(fields) < 6:
        return expr  # croniter says what is missing
    dow = fields[5]

    def moved(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if not 1 <= n <= 7:
            raise ValueError(f"day of week {n} is out of range: Quartz numbers the days 1 (Sunday) to 7")
        return str(n - 1)

    fields[5] = _DOW_NUMBER.sub(moved, dow)
    return " ".join(fields)


def cron_error(expr: str) -> str | None:
    """Why `expr` is not a Quartz cron expression with seconds that ever fires, or None when it is."""
    fields = expr.split()
    if len(fields) not in (6, 7):
        return (
            f"a cron expression has 6 or 7 fields (seconds minutes hours day-of-month month day-of-week "
            f"[year]); this one has {len(fields)}"
        )
    from croniter import croniter  # here: every module with the graph imports this one

    try:
        text = quartz_to_croniter(expr)
        it = croniter(text, datetime(2000, 1, 1, tzinfo=UTC), second_at_beginning=True)
        it.get_next(float)
    except (ValueError, KeyError, TypeError, OverflowError) as err:  # croniter's errors are ValueErrors
        text = str(err) or type(err).__name__
        if "failed to find next date" in text:
            return "it never fires"
        if "is not acceptable" in text:  # croniter shows its own reordering of the fields: not the user's
            return (
                "a field is out of range or in a form that is not read (Quartz's LW and a weekday with L, "
                "such as 6L, are not)"
            )
        return text
    return None
