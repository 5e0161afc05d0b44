"""`cep run`, independent of the engine: bind data stores, then hand the graph to an executor."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operators import graph as g


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
    engine: str
    events_in: int
    events_out: int
    dead_lettered: int
    late: int


def data_dir() -> Path:
    """Where embedded SQLite stores live when a data store is not bound to a URL."""
    return Path(os.environ.get("CEP_DATA_DIR", "cep-data"))


def bind_stores(graph: g.Graph, cli: dict[str, str]) -> Any:
    """(bindings, declarations) for the script's data stores, or None when it declares none."""
    if not graph.stores:
        if cli:
            raise ValueError(f"--store given, but the script declares no data store ({', '.join(cli)})")
        return None
    from stores.urls import resolve_bindings

    bindings = resolve_bindings(graph.stores, cli, os.environ, data_dir())
    return bindings, dict(graph.stores)


def run_script(req: RunRequest, out: Any = sys.stderr) -> RunSummary:
    config = bind_stores(req.graph, req.stores)
    if config is not None:
        for name, url in config[0].items():
            print(f"data store {name}: {url.redacted()}", file=out)
    if req.engine == "local":
        from deployer.local import run_local
        from stores.registry import StoreRegistry

        registry = StoreRegistry(*config) if config is not None else None
        try:
            stats = run_local(
                req.graph, req.sources, req.sinks, registry, req.dead_letter, until_idle=req.until_idle
            )
        finally:
            if registry is not None:
                registry.close()
        summary = RunSummary(
            "local",
            sum(stats.events_in.values()),
            # events written to the requested sinks (not every intermediate stream)
            sum(n for name, n in stats.events_out.items() if name.lower() in {k.lower() for k in req.sinks}),
            sum(stats.dead_lettered.values()),
            sum(stats.late.values()),
        )
    else:
        from deployer.spark_run import SparkDeployment, spark_session

        spark = spark_session(req.master)
        deployment = SparkDeployment(
            spark,
            req.graph,
            req.sources,
            req.sinks,
            req.checkpoint,
            req.dead_letter,
            config,
            req.until_idle,
            max_files_per_trigger=req.max_files_per_trigger,
        )
        stats_s = deployment.run(out=out)
        summary = RunSummary("spark", stats_s.rows_in, stats_s.rows_out, stats_s.dead_lettered, 0)
    print(
        f"done ({summary.engine}): {summary.events_in} events in, {summary.events_out} out, "
        f"{summary.dead_lettered} dead-lettered, {summary.late} late",
        file=out,
    )
    return summary
