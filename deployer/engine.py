"""What `cep run` hands an engine and what an engine gives back, whichever engine it is.

The engines (deployer.local.engine, deployer.spark.engine) import this module; the runner
(deployer.runner) picks one from its table and prints the summary. Nothing here knows an engine.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Protocol

from operators import graph as g
from stores.bindings import StoreBindings


def one_line(text: str) -> str:
    """A message of several lines as one (a data store's may have several: a table not as declared
    shows both definitions, a refused connection adds the driver's hint): a run that stops says why
    in one `error:` line, the same on both engines."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


class RunFailed(RuntimeError):
    """A run stopped by an error that is not about one event (docs/guarantees.md, "Data store
    errors"): the message says what failed (a data store's error names the store, its URL redacted)
    and what running again does. `cep run` prints it as one `error:` line and exits 1."""


@dataclass(frozen=True)
class RunRequest:
    graph: g.Graph
    engine: str = "spark"
    sources: dict[str, str] = field(default_factory=dict)
    sinks: dict[str, str] = field(default_factory=dict)
    stores: dict[str, str] = field(default_factory=dict)
    dead_letter: str | None = None
    until_idle: bool = False
    checkpoint: str | None = None
    master: str | None = None
    max_files_per_trigger: int | None = None  # Spark file sources; the local engine reads file by file


@dataclass(frozen=True)
class RunSummary:
    """The counts of a run (docs/guarantees.md, "Counting events"): for a script with one output
    that keeps events one for one, events_in = applied (or events_out) + dead_lettered + filtered
    + late."""

    engine: str
    events_in: int  # records read: events and the records rejected as input
    events_out: int  # rows written to the requested sinks
    dead_lettered: int  # records and events dead-lettered (late events are counted in `late`)
    late: int
    stopped_by: int | None = None  # the signal that stopped the run before the end of its input
    applied: int = 0  # rows the stores accepted into tables
    filtered: int | None = 0  # events dropped by a WHERE (Filter/MultiFilter); None: not counted


def check_bindings(graph: g.Graph, sources: dict[str, str], sinks: dict[str, str]) -> None:
    """Refuse a `--source` for a stream that is not a source of the script, or a `--sink` for a stream
    it does not have: the same ValueError whichever engine runs it (names are case-insensitive)."""
    declared = [s.stream for s in graph.sources() if s.trigger is None]
    triggers = {s.stream.lower() for s in graph.sources() if s.trigger is not None}
    for stream in sources:
        if stream.lower() in triggers:
            raise ValueError(
                f"source '{stream}': the script declares it a trigger (CREATE TRIGGER), whose events are "
                "the engine's ticks; it takes no --source"
            )
        if stream.lower() not in {d.lower() for d in declared}:
            raise ValueError(
                f"source '{stream}': the script has no source stream of that name ({', '.join(declared)})"
            )
    for stream in sinks:
        if stream.lower() not in {s.lower() for s in graph.streams}:
            raise ValueError(
                f"sink '{stream}': the script has no stream of that name ({', '.join(graph.streams)})"
            )


class Engine(Protocol):
    """Runs a request whose data stores are bound (`stores`: the bindings, None without stores)."""

    def __call__(self, req: RunRequest, stores: StoreBindings | None, out: Any) -> RunSummary: ...


@contextlib.contextmanager
def stop_requests() -> Iterator[tuple[threading.Event, list[int]]]:
    """While inside: the first SIGTERM or SIGINT sets the event (and is recorded in the list), for
    the run to stop between micro-batches; a second one raises KeyboardInterrupt, to stop at once.

    Only the main thread can own signals; elsewhere (a run inside another program) the event is
    never set by a signal and the caller's handlers stay as they are.
    """
    event, got = threading.Event(), list[int]()
    if threading.current_thread() is not threading.main_thread():
        yield event, got
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        got.append(signum)
        event.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield event, got
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
