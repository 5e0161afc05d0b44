"""`cep run`, independent of the engine: bind the data stores, run the graph on the chosen engine
(`ENGINES`), print the summary line. Binding the stores the same way for the compiler
(`describer`, `compile_bound`) is here too: every command that compiles a script to run or show it
compiles it so.

A new engine is a module with a `run(req, stores, out) -> RunSummary` (deployer.engine.Engine) and a
line in `ENGINES`. The engines are imported when chosen: the Spark one imports pyspark, which a
local run, `cep check` or `cep explain` need not pay for.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cpl.compiler import Compiled, compile_script
from deployer import settings
from deployer.engine import Engine, RunRequest, RunSummary
from operators import graph as g
from operators.declarations import DataStore, DescribeQuery, ResultColumn, SqlQuery
from stores.bindings import StoreBindings, bind_store, resolve_bindings
from stores.retry import RetryPolicy
from stores.urls import StoreURL

# engine name -> the module whose `run` runs a request on it
ENGINES: dict[str, str] = {
    "local": "deployer.local.engine",
    "spark": "deployer.spark.engine",
}


def engine(name: str) -> Engine:
    """The engine called `name`; ValueError naming the known ones otherwise."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine '{name}'; engines: {', '.join(ENGINES)}")
    run: Engine = importlib.import_module(ENGINES[name]).run
    return run


def data_dir() -> Path:
    """Where embedded SQLite stores live when a data store is not bound to a URL."""
    return settings.current().data_dir


def retry_policy() -> RetryPolicy:
    conf = settings.current()
    return RetryPolicy(tries=conf.store_retries, base_s=conf.store_retry_base_ms / 1000)


def bind_stores(graph: g.Graph, cli: Mapping[str, str]) -> StoreBindings | None:
    """The script's data stores bound to URLs, with the retry policy of the settings, or None when
    it declares none."""
    if not graph.stores:
        if cli:
            raise ValueError(f"--store given, but the script declares no data store ({', '.join(cli)})")
        return None
    return resolve_bindings(graph.stores, cli, os.environ, data_dir(), retry=retry_policy())


def describer(cli: Mapping[str, str]) -> DescribeQuery:
    """What the compiler asks for the result types of a script's SELECTs (cpl.describe): each store
    bound as `bind_stores` will bind it (`--store`, CEP_STORE_<NAME>_URL, the embedded default), when
    the compiler first needs it, since the script's stores are known only as it is compiled. A
    `--store` name the script does not declare is `bind_stores`'s to report."""
    env = dict(os.environ)
    directory = data_dir()
    texts = {name.lower(): text for name, text in cli.items()}

    def bind(store: g.DataStore) -> StoreURL:
        return bind_store(store, texts.get(store.name.lower()), env, directory)

    asked: list[DescribeQuery] = []

    def describe(query: SqlQuery, store: DataStore) -> tuple[ResultColumn, ...]:
        # The describer (psycopg, SQLAlchemy) is imported for the first SELECT it describes, not by
        # every `cep` command: 0.2 s of the start of each (python -X importtime), most need no store.
        if not asked:
            from stores.sql.describe import StoreDescriber

            asked.append(StoreDescriber(bind, retry_policy()))
        return asked[0](query, store)

    return describe


def compile_bound(source: str, filename: str, cli: Mapping[str, str]) -> Compiled:
    """`compile_script` with the data stores bound as `cep run` binds them (`describer`)."""
    return compile_script(source, filename, describe=describer(cli))


def run_script(req: RunRequest, out: Any = sys.stderr) -> RunSummary:
    run = engine(req.engine)
    config = bind_stores(req.graph, req.stores)
    if config is not None:
        for name, url in config.urls.items():
            print(f"data store {name}: {url.redacted()}", file=out)
    summary = run(req, config, out)
    print(summary_line(summary, req.checkpoint is not None), file=out)
    return summary


def summary_line(summary: RunSummary, checkpointed: bool) -> str:
    """The run's last line: how it ended, and its counts (docs/guarantees.md, "Counting events")."""
    filtered = "? (not counted: CEP_COUNT_FILTERED=0)" if summary.filtered is None else summary.filtered
    counts = (
        f"{summary.events_in} events in, {summary.events_out} out, {summary.applied} applied, "
        f"{summary.dead_lettered} dead-lettered, {filtered} filtered, {summary.late} late"
    )
    if summary.stopped_by is None:
        return f"done ({summary.engine}): {counts}"
    if checkpointed:
        return (
            f"stopped ({summary.engine}): {counts}; run the same command with the same --checkpoint to resume"
        )
    return (
        f"stopped ({summary.engine}): {counts}; without --checkpoint its progress is not kept: "
        "a new run starts from the beginning of the input"
    )
