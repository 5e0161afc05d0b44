"""The clock triggers tick on (docs/language.md, "Triggers"; docs/settings.md, `CEP_TRIGGER_CLOCK`).

A trigger is processing time by nature: it ticks when the engine's clock passes its tick. By default
that is the machine's clock. `CEP_TRIGGER_CLOCK=START/NOW` (two ISO 8601 instants, or epoch
milliseconds) puts a controlled clock in its place, for tests and replays: a deployment that starts
under it records START as its start, and the time is NOW for as long as it runs, so a run emits
exactly the ticks in [START, NOW] and the suite never sleeps for a tick. A later run on the same
checkpoint with a later NOW goes on from the last tick, as a restart does under the real clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from deployer import settings
from deployer.settings import SettingsError
from operators.values import parse_timestamp, to_micros

VARIABLE = "CEP_TRIGGER_CLOCK"


@dataclass(frozen=True)
class Clock:
    """The machine's clock (`fixed` None), or a controlled one: (start, now) in epoch ms."""

    fixed: tuple[int, int] | None = None

    def start_ms(self) -> int:
        """What a deployment that starts now records as its triggers' start."""
        return self.fixed[0] if self.fixed is not None else self.now_ms()

    def now_ms(self) -> int:
        return self.fixed[1] if self.fixed is not None else time.time_ns() // 1_000_000

    def spec(self) -> str:
        """This clock as `parse` reads it: how a Spark source is told which clock to tick on."""
        return "" if self.fixed is None else f"{self.fixed[0]}/{self.fixed[1]}"


def current() -> Clock:
    """The clock of this process's settings."""
    return parse(settings.current().trigger_clock or "")


def parse(text: str) -> Clock:
    """`START/NOW` → a controlled clock, "" → the machine's; SettingsError naming the variable."""
    if not text.strip():
        return Clock()
    start, sep, now = text.partition("/")
    if not sep:
        raise SettingsError(
            f"{VARIABLE}={text!r} is not START/NOW (two instants, e.g. 2026-01-01T00:00Z/2026-01-01T01:00Z)"
        )
    a, b = _instant(start, text), _instant(now, text)
    if b < a:
        raise SettingsError(f"{VARIABLE}={text!r}: NOW is before START")
    return Clock((a, b))


def _instant(part: str, text: str) -> int:
    part = part.strip()
    if part.lstrip("-").isdigit():
        return int(part)
    ts = parse_timestamp(part)
    if ts is None:
        raise SettingsError(f"{VARIABLE}={text!r}: {part!r} is not an ISO 8601 instant or epoch milliseconds")
    return to_micros(ts) // 1000
