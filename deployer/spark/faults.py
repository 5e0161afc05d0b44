"""Fault-injection hooks for the fault tests (tests/faults/). TEST HOOKS ONLY: never set these in a
real deployment; unset, they cost one environment look-up when a plan is built and nothing per batch.

They put a run exactly at the points that a random SIGKILL only hits by chance, so that the tests
can check what the ledger (stores/ledger.py) does there:

`CEP_FAULT_AFTER_COMMIT=TABLE:BATCH`
    The driver SIGKILLs its own process group (itself and its JVM: everything but the Python worker
    daemon, which exits when the JVM is gone) right after the Materialize into TABLE has committed
    micro-batch BATCH in its store, and before Spark logs the batch as committed in the checkpoint.
    The restart then replays BATCH, which the store has already applied.

`CEP_FAULT_AFTER_UPDATE=QUERY:MARKER`
    The first executor task whose UpdateSQL of QUERY (the CREATE SQLQUERY name) has committed a
    batch, and that manages to create the file MARKER, raises: a task that failed after its effect
    took place. One-shot across processes through the file; Spark retries the task when the master
    allows task retries (`local[N,M]`), and the retry executes the same events again.

Both are read once, on the driver, when the plan is built (deployer/spark/datastores/sql.py); the UpdateSQL hook
travels to the executors inside the task's closure.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable

from deployer import settings

AFTER_COMMIT = "CEP_FAULT_AFTER_COMMIT"
AFTER_UPDATE = "CEP_FAULT_AFTER_UPDATE"


class InjectedFault(RuntimeError):
    """The failure `CEP_FAULT_AFTER_UPDATE` injects."""


def _setting(value: str | None, name: str) -> str | None:
    """The part after `NAME:` of the setting when it names `name` (case-insensitive), else None."""
    target, sep, rest = (value or "").partition(":")
    return rest if sep and target.lower() == name.lower() else None


def after_commit_hook(table: str) -> Callable[[int], None] | None:
    """What the Materialize of `table` calls with each batch id once the batch is committed."""
    batch = _setting(settings.current().fault_after_commit, table)
    return None if batch is None else functools.partial(_kill_at, int(batch))


def _kill_at(at: int, batch_id: int) -> None:
    if batch_id == at:
        os.killpg(0, signal.SIGKILL)


def after_update_hook(query: str) -> Callable[[], None] | None:
    """What the UpdateSQL of `query` calls in the executor after each committed batch."""
    marker = _setting(settings.current().fault_after_update, query)
    return None if not marker else functools.partial(_fail_once, marker, query)


def _fail_once(marker: str, query: str) -> None:
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return  # fired already, in this process or another
    raise InjectedFault(f"{AFTER_UPDATE}: injected failure after the UpdateSQL of {query} committed")
