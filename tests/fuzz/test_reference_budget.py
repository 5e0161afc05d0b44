"""The fuzzer's budget for the reference on one case (fuzz_harness.REFERENCE_BUDGET_S, docs/fuzzing.md
"Budget"): a case that runs past it stops with TooCostly, which the property draws again; the timer
is gone once the case is over. No engine run."""

from __future__ import annotations

import signal
import time

import pytest
from fuzz_harness import TooCostly, budget


def test_a_case_past_the_budget_stops_with_too_costly() -> None:
    started = time.monotonic()
    with pytest.raises(TooCostly), budget(0.2):
        while time.monotonic() - started < 5:
            pass
    assert time.monotonic() - started < 2
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_case_within_it_runs_on_and_leaves_no_timer() -> None:
    before = signal.getsignal(signal.SIGALRM)
    with budget(5):
        total = sum(range(1000))
    assert total == 499500
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before
