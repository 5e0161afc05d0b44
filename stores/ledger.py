"""The effect ledger: what makes UpdateSQL and Materialize exactly-once in effect (docs/architecture.md, decision 6).

Spark replays a micro-batch after a failure with the same batch id and the same events, and every
event carries a deterministic id (`__seq`). A write is recorded in the ledger in the same
transaction as the write itself, so after a replay the ledger says exactly which effects already
happened, never more, never less:

- UpdateSQL: one entry per event, key = the event id, under the scope (deployment, node id). The
  entry keeps the event's affected-row count, or the reason it failed, so a replay returns the same
  counts and dead-letters the same events without executing anything again.
- Materialize: one entry per batch, key = the Spark batch id, under (deployment, node id). The entry
  keeps the rows that failed (JSON), for the same reason.

In SQL stores the ledger is the table `cep_ledger` (stores/sql/ledger_table.py), created on first use, with the primary key
(deployment, operator, key). A Materialize *claims* its batch's entry first (`INSERT`), an UpdateSQL
inserts its events' entries, with their counts, after executing them, in the same transaction;
either way a concurrent transaction writing the same key waits for the first one to commit and then
fails on the key, so everything it did rolls back: two Spark queries replaying the same upstream
batch at once cannot both apply it. What is already recorded is then claimed around with
`ON CONFLICT DO NOTHING` and returned as recorded.
In Redis, a marker key per batch is written in the same MULTI/EXEC as the rows (stores/redis/store.py).

Entries are never deleted by the engine: a deployment's entries can be dropped with the deployment
(`DELETE FROM cep_ledger WHERE deployment = ...`), old ones by `created_at`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

TABLE = "cep_ledger"
MAX_KEY = 200  # longer ids are stored as a digest, to keep the index small
MAX_NAME = 200  # deployment names and operator ids


@dataclass(frozen=True)
class Scope:
    deployment: str
    operator: str


def scope(deployment: str, operator: str) -> str:
    """The `scope` argument of `Stores.update` for an operator of a deployment."""
    return f"{deployment}/{operator}"


def parse_scope(text: str) -> Scope:
    """ "deployment/operator": operator ids never hold a '/', a deployment name may."""
    deployment, sep, operator = text.rpartition("/")
    if not sep or not deployment or not operator:
        raise ValueError(f"ledger scope {text!r} is not 'deployment/operator'")
    _check_names(deployment, operator)
    return Scope(deployment, operator)


def batch_entry(key: tuple[str, str, int]) -> tuple[str, str, str]:
    """(deployment, operator, key) of the ledger row of a Materialize batch."""
    deployment, operator, batch_id = key
    if not deployment or not operator:
        raise ValueError(f"ledger key {key!r} needs a deployment and an operator")
    _check_names(deployment, operator)
    return deployment, operator, batch_key(batch_id)


def _check_names(deployment: str, operator: str) -> None:
    for what, name in (("deployment name", deployment), ("operator id", operator)):
        if len(name) > MAX_NAME:
            raise ValueError(f"{what} {name[:40]!r}... is longer than {MAX_NAME} characters")


def entry_key(event_id: str) -> str:
    """The ledger key of an event id: the id itself, readable, when it is short and plain text.

    Event ids may hold NUL characters (Postgres text cannot) and be long (file paths): those are
    stored as `sha256:<hex>`. `%` is escaped so that the two forms never meet.
    """
    plain = event_id.replace("%", "%25").replace("\x00", "%00")
    if len(plain) <= MAX_KEY and not plain.startswith("sha256:"):
        return plain
    return "sha256:" + hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).hexdigest()


def batch_key(batch_id: int) -> str:
    return f"batch:{int(batch_id)}"


def errors_json(errors: Sequence[str | None]) -> str | None:
    failed = {str(i): e for i, e in enumerate(errors) if e is not None}
    return json.dumps(failed, ensure_ascii=False) if failed else None


def errors_from_json(text: str | None, n: int) -> list[str | None]:
    out: list[str | None] = [None] * n
    if text:
        for i, e in json.loads(text).items():
            if 0 <= int(i) < n:
                out[int(i)] = e
    return out


def first_occurrences(keys: Sequence[str]) -> dict[str, int]:
    """Index of the first event with each key: an id seen twice in one batch is one event."""
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    return first
