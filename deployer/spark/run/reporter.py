"""How a Spark run shows its progress: a progress bar on a terminal, plain lines otherwise.

On a terminal (rich decides: a TTY, not a dumb one) one bar counts the run's queries that have
consumed their input (`--until-idle`; a run that watches its input for ever has no end, and its
bar only pulses), and its text says which batch each query is at and what the read caches did.
Anywhere else (a pipe, a file, CI) the same text is printed as a `progress: ...` line every few
seconds, which a log keeps and a test can read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress

_REDRAW_S = 0.5


def progress_text(queries: Iterable[Any], cache_counters: Mapping[str, Any]) -> str:
    """What the queries report of their last micro-batch, and the read caches' counters."""
    parts = []
    for q in queries:
        p = q.lastProgress
        if not p:
            continue
        parts.append(
            f"{q.name.split(':', 1)[1]}: batch {p['batchId']}, "
            f"in {p.get('inputRowsPerSecond', 0.0):.0f}/s, processed {p.get('processedRowsPerSecond', 0.0):.0f}/s"
        )
    for name, (hits, misses, loads) in sorted(cache_counters.items()):
        parts.append(f"cache {name}: {hits.value} hits, {misses.value} misses, {loads.value} loads")
    return "; ".join(parts) if parts else "starting"


class Reporter:
    """Shows a run's progress on `out`: `update` as often as wished, `close` at the end."""

    def __init__(self, out: Any, total: int | None, every: float = 5.0) -> None:
        self.out, self.every = out, every
        self._last = time.monotonic()
        self._bar: Progress | None = None
        if not _maybe_terminal(out):
            return
        # rich only where it may draw: its import is about a tenth of a second of every run
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=out)
        if console.is_terminal:
            self._bar = Progress(
                TextColumn("[bold]queries[/bold]"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=console,
                transient=True,
            )
            self._task = self._bar.add_task("starting", total=total)
            self._bar.start()

    @property
    def live(self) -> bool:
        return self._bar is not None

    def update(self, done: int, text: Callable[[], str]) -> None:
        """`done` queries have consumed their input; `text()` (called only when shown) says the rest.
        The bar is redrawn twice a second at most, a plain line printed every `every` s."""
        now = time.monotonic()
        if now - self._last < (_REDRAW_S if self._bar is not None else self.every):
            return
        self._last = now
        if self._bar is not None:
            self._bar.update(self._task, completed=done, description=text())
        else:
            print(f"progress: {text()}", file=self.out)

    def say(self, line: str) -> None:
        """A line of its own (above the bar on a terminal)."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.out)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _maybe_terminal(out: Any) -> bool:
    """Whether rich could take `out` for a terminal: a TTY, or the settings that make it one
    (FORCE_COLOR, TTY_COMPATIBLE); rich decides the rest."""
    isatty = getattr(out, "isatty", None)
    try:
        tty = bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed file
        tty = False
    return tty or "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ
