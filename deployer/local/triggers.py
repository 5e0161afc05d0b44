"""A trigger's stream on the local engine: its ticks, read from the clock at each poll of the run's
loop (deployer.local.driver), from the run's start (the local engine keeps no checkpoint)."""

from __future__ import annotations

from collections.abc import Iterator

from deployer.connectors.records import RawRecord
from deployer.triggers.clock import Clock
from deployer.triggers.ticks import SCHEME, Ticking, records
from operators import graph as g


class TriggerInput:
    """The ticks of one trigger that the clock has passed and the run has not read yet."""

    blocking = False  # the driver's loop polls; a tick due between polls waits for the next one
    uri = SCHEME

    def __init__(self, source: g.Source, clock: Clock):
        assert source.trigger is not None
        self.stream = source.stream
        self.clock = clock
        self.ticking = Ticking(source.trigger, clock.start_ms())

    def next_batch(self) -> Iterator[RawRecord] | None:
        first = self.ticking.done
        ticks = self.ticking.due(self.clock.now_ms())
        return records(self.stream, first, ticks) if ticks else None

    def wait(self) -> bool:
        return False

    def close(self) -> None:
        pass
