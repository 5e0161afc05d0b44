"""Running a statement with an OUTPUT clause on the reference executor along a timeline of events and
watermarks (milliseconds after T0), and seeing which rows came out at which step: the scenarios of
../shared/SIDDHI-SEMANTICS.md §4, read in event time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cpl.compiler import compile_script
from deployer.local.executor import LocalExecutor

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# Siddhi's rate-limit tests send one event per ip address 192.10.1.N; `ip` holds ".N".
STREAM = "CREATE STREAMSCHEMA s WITH ip varchar, v integer, ts timestamp TIMESTAMP BY ts;\n"
UNTIMED = "CREATE STREAMSCHEMA u WITH ip varchar, v integer;\n"


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


class Timeline:
    """`step(...)` pushes an event (ms, ip, v) or moves the watermark (`wm=ms`); each step returns
    the rows of stream `o` that came out during it."""

    def __init__(self, statements: str, streams: str = STREAM, watch: str = "o") -> None:
        self.graph = compile_script(streams + statements).graph
        self.watch = watch
        self.rows: list[tuple[Any, ...]] = []
        self.all: dict[str, list[tuple[Any, ...]]] = {}
        self.ex = LocalExecutor(self.graph, None, on_output=self._out)

    def _out(self, stream: str, row: tuple[Any, ...]) -> None:
        self.all.setdefault(stream, []).append(row)
        if stream == self.watch:
            self.rows.append(row)

    def _taken(self) -> list[tuple[Any, ...]]:
        out, self.rows = self.rows, []
        return out

    def event(self, ms: int, ip: str, v: int) -> list[tuple[Any, ...]]:
        self.ex.push("s", (ip, v, at(ms)))
        return self._taken()

    def wm(self, ms: int) -> list[tuple[Any, ...]]:
        self.ex.advance_watermark("s", at(ms))
        return self._taken()

    def finish(self) -> list[tuple[Any, ...]]:
        self.ex.finish()
        return self._taken()


def ips(rows: list[tuple[Any, ...]]) -> list[str]:
    return [r[0] for r in rows]


def run_all(statements: str, events: list[tuple[int, str, int]], until: int | None = None) -> list[Any]:
    """Every row of `o` for these events, the watermark moved to `until` before the end of input."""
    t = Timeline(statements)
    out: list[Any] = []
    for e in events:
        out += t.event(*e)
    if until is not None:
        out += t.wm(until)
    return out + t.finish()
