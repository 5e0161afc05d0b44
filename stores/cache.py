"""The ReadSQL cache: `CREATE SQLQUERY ... CACHE n ROWS [TTL d]` (docs/architecture.md, decision 4).

One LRU per query per process, in front of `read()`, keyed by the parameter tuple: `n` is the
number of parameter tuples kept, each with all its result rows. An empty result is kept too
(negative entry), so a lookup that finds nothing is not asked again. With a TTL an entry is served
for at most that long after it was loaded; without one, until it is evicted.

A batch is served from the cache where it can be; the misses, each distinct tuple once, go to the
store in one `read()` (one round trip on Postgres). The cache is not told about writes: a script
that updates what it reads with a cache sees a value up to TTL old, which is what CACHE asks for.

Keys carry each value's type, so 1, 1.0 and True (equal in Python) are three entries, as they are
three different parameters for the database.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

Row = tuple[Any, ...]
Key = tuple[tuple[type, Any], ...]


class ReadCache:
    def __init__(
        self, size: int, ttl_ms: int | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.size = max(0, size)
        self.ttl_s = ttl_ms / 1000 if ttl_ms is not None else None
        self._clock = clock
        self._entries: OrderedDict[Key, tuple[float, list[Row]]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # events answered from the cache
        self.misses = 0  # events that were not (absent or expired)
        self.loads = 0  # read() calls made to fill misses
        self.loaded = 0  # distinct parameter tuples loaded by those calls
        self.evictions = 0  # entries dropped to make room
        self.expired = 0  # entries dropped because their TTL had passed

    @staticmethod
    def key(params: Row) -> Key:
        return tuple((type(v), v) for v in params)

    def read(
        self, params: Sequence[Row], load: Callable[[Sequence[Row]], list[list[Row]]]
    ) -> list[list[Row]]:
        out: list[list[Row] | None] = [None] * len(params)
        wanted: dict[Key, list[int]] = {}
        now = self._clock()
        with self._lock:
            for i, p in enumerate(params):
                k = self.key(p)
                found = self._entries.get(k)
                if found is not None and self.ttl_s is not None and now - found[0] >= self.ttl_s:
                    del self._entries[k]
                    self.expired += 1
                    found = None
                if found is None:
                    self.misses += 1
                    wanted.setdefault(k, []).append(i)
                else:
                    self.hits += 1
                    self._entries.move_to_end(k)
                    out[i] = list(found[1])
        if wanted:
            firsts = [params[idx[0]] for idx in wanted.values()]
            rows = load(firsts)  # outside the lock: a slow store must not block other threads' hits
            loaded_at = self._clock()
            with self._lock:
                self.loads += 1
                self.loaded += len(firsts)
                for (k, idx), r in zip(wanted.items(), rows, strict=True):
                    for i in idx:
                        out[i] = list(r)
                    if self.size:
                        self._entries[k] = (loaded_at, list(r))
                        self._entries.move_to_end(k)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
                    self.evictions += 1
        return [r if r is not None else [] for r in out]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "loads": self.loads,
                "loaded": self.loaded,
                "evictions": self.evictions,
                "expired": self.expired,
                "entries": len(self._entries),
                "size": self.size,
            }
