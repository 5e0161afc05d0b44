"""`cep run --engine local`: the reference executor over the run's files, Redis streams or stdin."""

from __future__ import annotations

from typing import Any

from deployer.engine import RunFailed, RunRequest, RunSummary, check_bindings, one_line
from deployer.local.driver import run_local
from stores.bindings import StoreBindings
from stores.errors import StoreError
from stores.registry import StoreRegistry

# What a stopped run says after the store's error: the local engine keeps no checkpoint (its sinks,
# dead letters and the stores keep what the events before the error did).
RERUN = (
    "; the run stopped there: the local engine keeps no checkpoint, so once this is fixed, running "
    "it again reads its input from the beginning"
)


def run(req: RunRequest, stores: StoreBindings | None, out: Any) -> RunSummary:
    check_bindings(req.graph, req.sources, req.sinks)
    registry = StoreRegistry(stores) if stores is not None else None
    try:
        stats = run_local(
            req.graph, req.sources, req.sinks, registry, req.dead_letter, until_idle=req.until_idle
        )
    except StoreError as err:
        # Not about one event (those are dead-lettered): the run stops with the store's message,
        # already redacted, as the Spark engine's does (deployer.spark.run.deployment).
        raise RunFailed(f"{one_line(str(err))}{RERUN}") from err
    finally:
        if registry is not None:
            registry.close()
    sinks = {k.lower() for k in req.sinks}
    return RunSummary(
        "local",
        # the records read: the executor counts the events it accepted, the rejected records are
        # dead letters of stage "input" (Spark's count includes them too)
        stats.total_in + stats.dead_lettered.get("input", 0),
        # events written to the requested sinks (not every intermediate stream)
        sum(n for name, n in stats.events_out.items() if name.lower() in sinks),
        sum(stats.dead_lettered.values()),
        sum(stats.late.values()),
        applied=stats.total_applied,
        filtered=stats.total_filtered,
    )
