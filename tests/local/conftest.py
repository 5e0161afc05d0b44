"""Helpers for the reference-executor tests: compile a small CPL script and push events through it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cpl.compiler import compile_script
from deployer.local.executor import LocalExecutor

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float = 0, *, days: int = 0, hours: float = 0) -> datetime:
    """A timestamp `seconds` (and days/hours) after 2026-01-01T00:00:00Z."""
    return T0 + timedelta(days=days, hours=hours, seconds=seconds)


Execute = Callable[..., LocalExecutor]


def execute(
    script: str,
    events: Iterable[tuple[str, Sequence[Any]]] = (),
    *,
    stores: Any = None,
    finish: bool = True,
) -> LocalExecutor:
    """Compile `script`, push (stream, event) pairs in order, finish; the executor holds the results."""
    ex = LocalExecutor(compile_script(textwrap.dedent(script)).graph, stores)
    for stream, event in events:
        ex.push(stream, event)
    if finish:
        ex.finish()
    return ex


# Session-scoped: they are pure functions, and hypothesis tests may use them too.
@pytest.fixture(scope="session")
def run() -> Execute:
    return execute


@pytest.fixture(scope="session")
def ts() -> Callable[..., datetime]:
    return at
