"""Running a pattern on the reference executor with events at given times (milliseconds after T0):
the scenarios of ../shared/SIDDHI-SEMANTICS.md, read in event time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cpl.compiler import compile_script
from deployer.local.executor import LocalExecutor

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# Two or three streams of the same shape, as Siddhi's tests have (StockStream1, StockStream2 ...).
STREAMS = "".join(
    f"CREATE STREAMSCHEMA {s} WITH symbol varchar, price double, volume integer, ts timestamp "
    f"TIMESTAMP BY ts{wm};\n"
    for s, wm in (("a", ""), ("b", ""), ("c", ""), ("x", ""))
)


def at(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def run(statement: str, events: list[tuple[Any, ...]], streams: str = STREAMS) -> dict[str, list[Any]]:
    """`statement` (INSERT INTO o ...) over `events`: (stream, ms, symbol, price[, volume]); every
    output stream's rows, and the dead letters under "dead"."""
    graph = compile_script(streams + statement).graph
    ex = LocalExecutor(graph, None)
    for stream, ms, *values in events:
        if len(values) == 2:
            values.append(100)
        ex.push(stream, (*values, at(ms)))
    ex.finish()
    out: dict[str, list[Any]] = dict(ex.outputs)
    out["dead"] = [(d.stage, d.reason) for d in ex.dead_letters]
    return out


def rows(statement: str, events: list[tuple[Any, ...]], stream: str = "o") -> list[tuple[Any, ...]]:
    return list(run(statement, events).get(stream, []))
