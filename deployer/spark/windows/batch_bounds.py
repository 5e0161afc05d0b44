"""Where a BATCH window's windows begin and end in a group's events, as the reference executor
decides it event by event (docs/language.md, "BATCH window"), found with numpy over a micro-batch.

An event for which START holds opens a window while none is open, and is included; STOP is then
tested on each following event, and the first for which it holds is included and closes the window.
START is evaluated only while no window is open and STOP only inside one, so a condition that fails
(a failed CAST, a division by zero) fails only where it is evaluated: such an event is refused (its
dead letter says why) and belongs to no window. Events while no window is open are in none.
No pyspark here: deployer.spark.windows.window_state runs it inside its stateful processor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

START_ERR = "__start_err"  # the reason START fails on an event, NULL where it does not
STOP_ERR = "__stop_err"


@dataclass
class Bounds:
    """What a group's new events do: the windows they close (indices into the group's events: the
    open window's, then the new ones), where the window still open starts (-1: none), which events
    are in no window because their condition failed (`keep`), and those refused: (index among the new
    events, the column of its reason)."""

    windows: list[np.ndarray] = field(default_factory=list)
    open_at: int = -1
    keep: np.ndarray = field(default_factory=lambda: np.ones(0, dtype=bool))
    refused: list[tuple[int, str]] = field(default_factory=list)


def batch_bounds(
    start: np.ndarray,
    stop: np.ndarray,
    start_err: np.ndarray,
    stop_err: np.ndarray,
    held: int,
    is_open: bool,
) -> Bounds:
    """The windows of `held` events kept from earlier micro-batches (an open window's, when
    `is_open`) followed by new events whose START and STOP hold (`start`, `stop`) or fail
    (`start_err`, `stop_err`), all boolean arrays over the new events."""
    n = len(start)
    out = Bounds(open_at=0 if is_open else -1, keep=np.ones(held + n, dtype=bool))
    i = 0
    # A loop over window boundaries (starts, stops and refused events), not over events.
    while i < n:
        if out.open_at < 0:
            nxt = np.flatnonzero(start[i:] | start_err[i:])
            if not len(nxt):
                break
            i += int(nxt[0])
            if start_err[i]:
                _refuse(out, held, i, START_ERR)
            else:
                out.open_at = held + i  # STOP is not tested on the event that opens the window
            i += 1
            continue
        close = np.flatnonzero(stop[i:] | stop_err[i:])
        if not len(close):
            break
        i += int(close[0])
        if stop_err[i]:
            _refuse(out, held, i, STOP_ERR)
        else:
            span = np.arange(out.open_at, held + i + 1)
            out.windows.append(span[out.keep[span]])
            out.open_at = -1
        i += 1
    return out


def _refuse(out: Bounds, held: int, i: int, why: str) -> None:
    out.refused.append((i, why))
    out.keep[held + i] = False
