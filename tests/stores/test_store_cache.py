"""The ReadSQL cache (`CACHE n ROWS [TTL d]`): LRU by parameter tuple, negative entries, TTL, and
the counters the registry reports."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from store_helpers import query

from operators.graph import DataStore
from stores.bindings import StoreBindings
from stores.cache import ReadCache
from stores.registry import StoreRegistry
from stores.urls import parse_store_url

Row = tuple[Any, ...]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Loader:
    def __init__(self, table: dict[Any, list[Row]]) -> None:
        self.table = table
        self.calls: list[list[Row]] = []

    def __call__(self, params: Sequence[Row]) -> list[list[Row]]:
        self.calls.append(list(params))
        return [list(self.table.get(p[0], [])) for p in params]


def test_hits_misses_and_one_load_per_batch_of_misses() -> None:
    load = Loader({1: [("gold",)], 2: [("bronze",), ("tin",)]})
    cache = ReadCache(10)
    assert cache.read([(1,), (2,), (1,), (99,)], load) == [
        [("gold",)],
        [("bronze",), ("tin",)],
        [("gold",)],
        [],
    ]
    assert load.calls == [[(1,), (2,), (99,)]]  # one store call; each distinct tuple once
    assert cache.read([(99,), (2,), (3,)], load) == [[], [("bronze",), ("tin",)], []]
    assert load.calls[1:] == [[(3,)]]  # 99 was a negative entry: not asked again
    assert cache.stats() == {
        "hits": 2,
        "misses": 5,
        "loads": 2,
        "loaded": 4,
        "evictions": 0,
        "expired": 0,
        "entries": 4,
        "size": 10,
    }


def test_least_recently_used_is_evicted() -> None:
    load = Loader({k: [(k,)] for k in range(10)})
    cache = ReadCache(2)
    cache.read([(1,), (2,)], load)
    cache.read([(1,)], load)  # 1 is now the most recent
    cache.read([(3,)], load)  # evicts 2
    load.calls.clear()
    cache.read([(1,), (2,), (3,)], load)
    assert load.calls == [[(2,)]]
    assert cache.stats()["evictions"] == 2 and cache.stats()["entries"] == 2


def test_ttl_and_typed_keys() -> None:
    clock = Clock()
    load = Loader({1: [("a",)]})
    cache = ReadCache(10, ttl_ms=1000, clock=clock)
    cache.read([(1,)], load)
    clock.now = 0.999
    cache.read([(1,)], load)
    assert len(load.calls) == 1
    clock.now = 1.0
    cache.read([(1,)], load)
    assert len(load.calls) == 2 and cache.stats()["expired"] == 1
    # 1, 1.0 and True are equal in Python but different parameters for the database.
    cache.read([(1.0,), (True,)], load)
    assert load.calls[-1] == [(1.0,), (True,)]


def test_the_registry_caches_declared_queries_and_reports_counters(tmp_path: Path) -> None:
    db = tmp_path / "crm.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE plans (idcaller integer, idplan text)")
        conn.execute("INSERT INTO plans VALUES (1, 'gold'), (2, 'bronze')")
    conn.close()
    url = parse_store_url(f"sqlite:///{db}")
    reg = StoreRegistry(StoreBindings({"crm": url}, {"crm": DataStore("crm", "sqlite")}))
    plain = query("SELECT idplan FROM plans WHERE idcaller = ?", name="plan_now")
    cached = replace(query("SELECT idplan FROM plans WHERE idcaller = ?", name="plan_of"), cache_rows=100)
    try:
        assert reg.read(cached, [(1,), (3,)]) == [[("gold",)], []]
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE plans SET idplan = 'platinum' WHERE idcaller = 1")
            conn.execute("INSERT INTO plans VALUES (3, 'new')")
        conn.close()
        # CACHE trades freshness for round trips: the cached query still answers from the cache...
        assert reg.read(cached, [(1,), (3,), (2,)]) == [[("gold",)], [], [("bronze",)]]
        # ...a query without CACHE reads the store.
        assert reg.read(plain, [(1,), (3,)]) == [[("platinum",)], [("new",)]]
        assert reg.cache_stats() == {
            "plan_of": {
                "hits": 2,
                "misses": 3,
                "loads": 2,
                "loaded": 3,
                "evictions": 0,
                "expired": 0,
                "entries": 3,
                "size": 100,
            }
        }
    finally:
        reg.close()
