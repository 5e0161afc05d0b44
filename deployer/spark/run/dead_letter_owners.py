"""Which query writes each failure point's dead letters, kept in a checkpoint.

Several queries may be able to write a failure point's dead letters (a source's rejected records,
a stateless operator's failures, a window's failed rows): the plan gives them to one
(deployer.spark.run.queries), the first in its order. A query a later version of the script adds
may come first, but it reads its inputs from the beginning: taking the failure point over, it
would write its dead letters again (a rejected record twice, in another batch's file). So the
query that wrote them keeps them while it can still write them (queries.`chosen`), the
dead-letters query too.

`DIR/dead-letter-writers.json`, `{"owners": {failure point: query}}`, written by the deployment
before it starts its queries (a query that starts is then on record, whatever happens after). The
failure points: `input-<stream>` (a source's rejected records, and its late events),
`stateless-<node>` (a stateless operator's failures), `<node>` and `<node>-<k>` (a failure point
that a query's tasks write, or a query of its own, `failed:<node>`), `along <node>` (the failures of
a window's rows, a join's pairs or a data store call's results, written with them by the sink or
table that writes those). A checkpoint of the time before this record: its next run records the
plan it makes, as that time made it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from deployer.spark.run.queries import Query
from deployer.spark.run.whole_json import write_whole

RECORD = "dead-letter-writers.json"


def read(checkpoint: Path) -> dict[str, str]:
    """The checkpoint's record (empty when it has none)."""
    path = checkpoint / RECORD
    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8"))["owners"])


def owners_of(plan: Iterable[Query]) -> dict[str, str]:
    """Failure point -> the query of `plan` that writes its dead letters (the module docstring)."""
    out: dict[str, str] = {}
    for q in plan:
        if q.name.startswith("failed:"):
            out[q.name.removeprefix("failed:")] = q.name
            continue
        for label in q.spooled:
            out[label] = q.name
        for label in q.owns:  # the dead-letters query's
            out[label] = q.name
        for node in q.along:
            out[f"along {node}"] = q.name
    return out


def write(checkpoint: Path, owners: Mapping[str, str]) -> None:
    """Record `owners` (those of failure points the run does not have stay): whole, or not at all."""
    before = read(checkpoint)
    now = before | dict(owners)
    if now == before and (checkpoint / RECORD).is_file():
        return
    write_whole(checkpoint / RECORD, {"owners": now})
