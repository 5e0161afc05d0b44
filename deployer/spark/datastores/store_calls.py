"""How the Spark translation reaches the data stores: one registry per worker process, and the
deployment name that scopes the exactly-once ledger.

The bindings travel to the executors inside the tasks' closures (picklable); each Python worker
builds one StoreRegistry per binding and keeps it, so its connections are pooled and reused across
batches (docs/architecture.md, decision 4).
"""

from __future__ import annotations

import gc
import hashlib
import pickle

from deployer.spark.translate.graph import SparkGraph
from operators.explain import to_text
from stores.bindings import StoreBindings
from stores.registry import StoreRegistry

_STORES: dict[int, StoreRegistry] = {}
DEFAULT_DEPLOYMENT = "cep"


def worker_stores(config: StoreBindings) -> StoreRegistry:
    """One registry per worker process and configuration (pooled connections are reused)."""
    # pickle, not repr: a URL's repr hides its password, and two passwords are two configurations
    key = hash(pickle.dumps((config.urls, config.declared, config.retry)))
    if key not in _STORES:
        # The objects alive now (modules: pyspark, pandas, pyarrow...) live as long as the worker;
        # frozen, the garbage collector no longer walks them in every full collection, which the
        # result rows of each batch set off.
        gc.freeze()
        _STORES[key] = StoreRegistry(config)
    return _STORES[key]


def deployment_of(sg: SparkGraph) -> str:
    """The deployment name that scopes the ledger entries of this graph's writes.

    Without a name, one derived from the compiled graph: the same script replayed finds its own
    entries, and a different script over the same inputs (the same event ids) cannot skip its
    writes because of them.
    """
    name = sg.deployment or (sg.stores_config.deployment if sg.stores_config is not None else None)
    if name:
        return str(name)
    graph = sg.graph
    text = "\n".join(
        [
            to_text(graph),
            *(repr(q) for _, q in sorted(graph.queries.items())),
            *(repr(t) for _, t in sorted(graph.tables.items())),
        ]
    )
    return f"{DEFAULT_DEPLOYMENT}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def bound(sg: SparkGraph) -> StoreBindings:
    if sg.stores_config is None:
        raise ValueError("this script uses data stores; they must be bound before it runs on Spark")
    return sg.stores_config
