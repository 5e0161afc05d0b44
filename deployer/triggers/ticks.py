"""A trigger's ticks as records, read in turns as its clock passes them: what both engines' trigger
sources hand on (deployer.local.driver, deployer.spark.streams.trigger_source), so that they make
the same events from the same ticks."""

from __future__ import annotations

from collections.abc import Iterator

from deployer.connectors.records import RawRecord
from operators.triggers import TRIGGERED_TIME, Trigger

# The most ticks one read hands on: a deployment that was down for long catches up in turns.
MOST_PER_READ = 10_000
SCHEME = "trigger:"


def tick_record(stream: str, number: int, tick_ms: int) -> RawRecord:
    """Tick `number` (0 for the first) of `stream`, at `tick_ms`, as an input record."""
    return RawRecord(
        f'{{"{TRIGGERED_TIME}": {tick_ms}}}', f"{SCHEME}{stream}:{number + 1}", {TRIGGERED_TIME: tick_ms}
    )


class Ticking:
    """Where a trigger is in its schedule: its start and the last tick handed on."""

    def __init__(self, trigger: Trigger, start_ms: int, previous_ms: int | None = None, done: int = 0):
        self.trigger = trigger
        self.start_ms = start_ms
        self.previous_ms = previous_ms
        self.done = done  # ticks handed on

    def due(self, now_ms: int) -> list[int]:
        """The ticks due by `now_ms` not handed on yet (at most MOST_PER_READ), now handed on."""
        ticks = list(self.trigger.ticks(self.start_ms, self.previous_ms, now_ms, MOST_PER_READ))
        if ticks:
            self.previous_ms = ticks[-1]
            self.done += len(ticks)
        return ticks


def records(stream: str, first: int, ticks: list[int]) -> Iterator[RawRecord]:
    return (tick_record(stream, first + i, t) for i, t in enumerate(ticks))
