"""A BATCH window's boundaries over a micro-batch (deployer/spark/windows/batch_bounds.py), without a JVM:
START only while no window is open, STOP only after the event that opened it, and a condition that
fails only where it is evaluated refusing its event."""

from __future__ import annotations

import numpy as np

from deployer.spark.windows.batch_bounds import START_ERR, STOP_ERR, batch_bounds


def _bools(text: str) -> np.ndarray:
    return np.array([c == "x" for c in text], dtype=bool)


def _run(
    start: str, stop: str, start_err: str = "", stop_err: str = "", held: int = 0, is_open: bool = False
):
    n = len(start)
    b = batch_bounds(
        _bools(start),
        _bools(stop),
        _bools(start_err.ljust(n, ".")),
        _bools(stop_err.ljust(n, ".")),
        held,
        is_open,
    )
    return [w.tolist() for w in b.windows], b.open_at, b.refused


def test_start_opens_stop_closes_and_stop_is_not_tested_on_the_opener() -> None:
    # events:        0123456
    windows, open_at, refused = _run("x..x...", "xx..x.x")
    assert windows == [[0, 1], [3, 4]]
    assert open_at == -1 and refused == []


def test_a_failing_stop_while_closed_and_a_failing_start_while_open_are_not_evaluated() -> None:
    # 0: STOP fails, but no window is open; 1 opens; 2: START fails, but a window is open; 3 closes
    windows, open_at, refused = _run(".x..", "...x", start_err="..x.", stop_err="x...")
    assert windows == [[1, 2, 3]] and refused == [] and open_at == -1


def test_a_condition_failing_where_it_is_evaluated_refuses_its_event() -> None:
    # 0: START fails (closed): refused; 1 opens; 2: STOP fails (open): refused, not in the window; 3 closes
    windows, open_at, refused = _run(".x..", "...x", start_err="x...", stop_err="..x.")
    assert windows == [[1, 3]]
    assert refused == [(0, START_ERR), (2, STOP_ERR)]
    assert open_at == -1


def test_an_open_window_goes_on_from_the_events_held_before() -> None:
    # two events held in an open window; the new ones: a refused STOP, then the closing event
    windows, open_at, refused = _run("..x", ".x.", stop_err="x..", held=2, is_open=True)
    assert windows == [[0, 1, 3]]
    assert refused == [(0, STOP_ERR)]
    assert open_at == 4  # event 2 (index 4 among all) opened the next window


def test_nothing_opens_without_start() -> None:
    assert _run("...", "xxx") == ([], -1, [])
