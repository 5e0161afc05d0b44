"""`cep run --engine local`: the reference executor over the run's files, Redis streams or stdin."""

from __future__ import annotations

from typing import Any

from deployer.engine import RunRequest, RunSummary, check_bindings
from deployer.local.driver import run_local
from stores.bindings import StoreBindings
from stores.registry import StoreRegistry


def run(req: RunRequest, stores: StoreBindings | None, out: Any) -> RunSummary:
    check_bindings(req.graph, req.sources, req.sinks)
    registry = StoreRegistry(stores) if stores is not None else None
    try:
        stats = run_local(
            req.graph, req.sources, req.sinks, registry, req.dead_letter, until_idle=req.until_idle
        )
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
