"""Which sinks the shared queries of a checkpoint have written: the queries of pattern sinks
(deployer.spark.run.pattern_groups) and of stateless sinks (deployer.spark.run.queries
`stateless_groups`). A started shared query keeps its sinks and takes no new one, and a sink
removed from the script cannot come back (its query went on without it; a new one would write its
rows again from the beginning).

`DIR/shared-queries.json`, written by the deployment before it starts such a query (so a crash
after Spark has written the query's first offsets still finds it), read when a run plans its
queries and by the checkpoint guard: `{"queries": {name: [sink, ...]}, "sinks": [sink, ...]}`, the
sinks lower-case, `queries` as each query last started, `sinks` every sink any of them has written.
Its first version (2026-12-06) recorded the pattern sinks' queries only, as `pattern-queries.json`:
read when the checkpoint has no other, replaced by the first record written. A `cep run` checkpoint
written before either has the same facts in its manifest (deployer.spark.run.checkpoint
`shared_queries`), which is read instead; a service deployment's checkpoint of that time has
neither: its next run plans its shared queries as that time did (every stateless sink in one, every
pattern sink over the same streams in one) and records them so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from deployer.spark.run.whole_json import write_whole

RECORD = "shared-queries.json"
FIRST_RECORD = "pattern-queries.json"  # the pattern sinks' only, 2026-12-06


@dataclass(frozen=True)
class SharedRecord:
    """The shared queries a checkpoint has started -> their sinks; every sink written."""

    queries: dict[str, set[str]] = field(default_factory=dict)
    sinks: set[str] = field(default_factory=set)


def read(checkpoint: Path) -> SharedRecord | None:
    """The checkpoint's record; None when it has none."""
    path = next((p for p in (checkpoint / RECORD, checkpoint / FIRST_RECORD) if p.is_file()), None)
    if path is None:
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    queries = {name: set(sinks) for name, sinks in data["queries"].items()}
    return SharedRecord(queries, set(data["sinks"]))


def write(checkpoint: Path, query: str, sinks: Iterable[str]) -> None:
    """Record that `query` starts with `sinks`: written whole, or not at all."""
    before = read(checkpoint) or SharedRecord()
    members = sorted(s.lower() for s in sinks)
    if before.queries.get(query) == set(members) and before.sinks >= set(members):
        return
    queries = {name: sorted(s) for name, s in before.queries.items()} | {query: members}
    data = {"queries": queries, "sinks": sorted(before.sinks | set(members))}
    write_whole(checkpoint / RECORD, data)
    (checkpoint / FIRST_RECORD).unlink(missing_ok=True)  # its facts are in the new one now
