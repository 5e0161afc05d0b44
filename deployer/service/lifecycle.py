"""What the deployment commands do to the catalog: deploy, start, stop, undeploy.

Each operation is one transaction that locks the deployment's row first (SQLite: the whole
database, BEGIN IMMEDIATE), so two `cep deploy` of one name run one after the other and the second
sees what the first wrote. The service is told through the row's `revision` (and, on PostgreSQL, the
NOTIFY that the catalog's trigger sends when it changes).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from cpl.errors import CompileError
from deployer.runner import compile_bound
from deployer.service.catalog import (
    NAME_RE,
    Catalog,
    CatalogError,
    check_no_secret,
    now,
    without_password_file,
)
from deployer.service.models import Deployment
from deployer.spark.run.compat import incompatibilities, outputs
from operators import graph as g
from stores.urls import parse_store_url


class Incompatible(CatalogError):
    """The new script cannot resume from the deployment's checkpoint."""


@dataclass(frozen=True)
class DeploySpec:
    name: str
    script: str
    sources: Mapping[str, str] = field(default_factory=dict)
    sinks: Mapping[str, str] = field(default_factory=dict)
    stores: Mapping[str, str] = field(default_factory=dict)
    dead_letter: str | None = None

    def bindings(self) -> dict[str, Any]:
        return {
            "sources": dict(self.sources),
            "sinks": dict(self.sinks),
            "stores": dict(self.stores),
            "dead_letter": self.dead_letter,
        }


@dataclass(frozen=True)
class Outcome:
    action: str  # "created" | "redeployed" | "reset" | "unchanged"
    message: str
    checkpoint: str


def script_hash(script: str) -> str:
    return hashlib.sha256(script.encode("utf-8")).hexdigest()


def new_checkpoint(name: str) -> str:
    """A fresh checkpoint location, relative to the service's data directory."""
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    return f"checkpoints/{name}/{stamp}-{secrets.token_hex(3)}"


def _named(names: Mapping[str, Any], wanted: str) -> bool:
    return any(n.lower() == wanted.lower() for n in names)


def validate(spec: DeploySpec, graph: g.Graph) -> None:
    """Every problem with the bindings at once, before the catalog is touched."""
    problems: list[str] = []
    if not NAME_RE.match(spec.name):
        problems.append(
            f"invalid deployment name {spec.name!r}: a letter, then up to 62 letters, digits, _ or -"
        )
    streams = ", ".join(graph.streams)
    for src in graph.sources():
        if src.trigger is not None:  # its ticks are the engine's: it takes no binding
            if _named(spec.sources, src.stream):
                problems.append(
                    f"--source {src.stream}=...: '{src.stream}' is a trigger (CREATE TRIGGER), whose events "
                    "are the engine's ticks; it takes no --source"
                )
        elif not _named(spec.sources, src.stream):
            problems.append(f"stream '{src.stream}' has no input: add --source {src.stream}=file:DIR")
    for what, bound in (("--source", spec.sources), ("--sink", spec.sinks)):
        for stream, uri in bound.items():
            if not _named(graph.streams, stream):
                problems.append(
                    f"{what} {stream}=...: the script has no stream '{stream}' (its streams: {streams})"
                )
            try:
                check_no_secret(f"{what} {stream}", uri)
            except CatalogError as err:
                problems.append(str(err))
    if spec.dead_letter:
        try:
            check_no_secret("--dead-letter", spec.dead_letter)
        except CatalogError as err:
            problems.append(str(err))
    for store, url in spec.stores.items():
        if not _named(graph.stores, store):
            declared = ", ".join(graph.stores) or "none"
            problems.append(
                f"--store {store}=...: the script declares no data store {store} (declared: {declared})"
            )
            continue
        try:
            check_no_secret(f"--store {store}", url)
            # Syntax only: a password_file is read by the service, on its machine.
            parse_store_url(without_password_file(url))
        except Exception as err:
            problems.append(str(err))
    if problems:
        raise CatalogError("\n".join(problems))


def _compile_deployed(script: str, stores: Mapping[str, str]) -> g.Graph | None:
    """The deployed script's graph as `cep deploy` compiles a new one: its stores bound (cpl.describe)."""
    try:
        return compile_bound(script, "<deployed>", stores).graph
    except CompileError:
        return None


def deploy(catalog: Catalog, spec: DeploySpec, graph: g.Graph, reset_state: bool = False) -> Outcome:
    """Create or replace the deployment `spec.name`, and ask the service to run it."""
    validate(spec, graph)
    digest = script_hash(spec.script)
    bindings = spec.bindings()
    with catalog.session() as s:
        row = catalog.locked(s, spec.name)
        if row is None:
            created = _create(catalog, s, spec, digest, bindings)
            if created is not None:
                return created
            # Another deploy of this name committed first: lock its row and redeploy over it.
            row = catalog.locked(s, spec.name)
            assert row is not None
        if row.script_hash == digest and row.bindings == bindings and not reset_state:
            return _unchanged(catalog, s, row)
        fresh = _check_compatible(spec, row, graph, bindings, reset_state)
        return _replace(catalog, s, row, spec, digest, bindings, reset_state, fresh)


def _create(
    catalog: Catalog, s: Session, spec: DeploySpec, digest: str, bindings: dict[str, Any]
) -> Outcome | None:
    """A new deployment's row; None when another deploy of the name inserted it first."""
    checkpoint = new_checkpoint(spec.name)
    t = now()
    values = {
        "name": spec.name,
        "script": spec.script,
        "script_hash": digest,
        "bindings": bindings,
        "desired_state": "running",
        "actual_state": "pending",
        "revision": 1,
        "checkpoint": checkpoint,
        "created_at": t,
        "updated_at": t,
        "restarts": 0,
        "events_in": 0,
        "events_out": 0,
    }
    if not catalog.insert_new(s, values):
        return None
    catalog.record(s, spec.name, "deployed", f"script sha256 {digest[:12]}, checkpoint {checkpoint}")
    return Outcome("created", f"deployed {spec.name} (checkpoint {checkpoint})", checkpoint)


def _unchanged(catalog: Catalog, s: Session, row: Deployment) -> Outcome:
    """The same script and bindings again: nothing changes, but a stopped deployment is started."""
    if row.desired_state != "running":
        row.desired_state = "running"
        row.revision += 1
        row.updated_at = now()
        catalog.record(s, row.name, "start-requested", "deployed again, unchanged")
        return Outcome("unchanged", f"{row.name} is unchanged; asked to start it", row.checkpoint)
    return Outcome("unchanged", f"{row.name} is unchanged", row.checkpoint)


def _check_compatible(
    spec: DeploySpec, row: Deployment, graph: g.Graph, bindings: dict[str, Any], reset_state: bool
) -> list[str]:
    """Refuse a new script that cannot resume from the deployment's checkpoint (deployer.spark.run.compat),
    unless its state is reset; the outputs it adds (which read their inputs from the beginning)."""
    old_graph = _compile_deployed(row.script, row.bindings.get("stores") or {})
    fresh: list[str] = []
    if old_graph is None:
        problems = ["the deployed script no longer compiles, so its state cannot be checked"]
    else:
        problems = incompatibilities(old_graph, row.bindings, graph, bindings)
        sources = [b.get("sources", {}) for b in (row.bindings, bindings)]
        before = outputs(old_graph, sources[0], row.bindings.get("sinks", {}))
        fresh = [key for key in outputs(graph, sources[1], bindings.get("sinks", {})) if key not in before]
    if problems and not reset_state:
        raise Incompatible(
            f"cannot redeploy {spec.name} over its checkpoint ({row.checkpoint}): the new script "
            "changes what the checkpoint holds (inputs read so far, window and join state):\n"
            + "\n".join(f"  - {p}" for p in problems)
            + "\nRedeploy with --reset-state to start from an empty state: the inputs are then read "
            "again from their beginning and the old checkpoint is deleted."
        )
    return fresh


def _replace(
    catalog: Catalog,
    s: Session,
    row: Deployment,
    spec: DeploySpec,
    digest: str,
    bindings: dict[str, Any],
    reset_state: bool,
    fresh: list[str],
) -> Outcome:
    """The deployment's new script and bindings, resuming from its checkpoint or from a new one;
    `fresh`: the outputs the script adds."""
    old_digest = row.script_hash
    row.script = spec.script
    row.script_hash = digest
    row.bindings = bindings
    row.desired_state = "running"
    row.actual_state = "pending" if row.actual_state != "running" else row.actual_state
    row.revision += 1
    row.updated_at = now()
    row.restarts = 0
    if not reset_state:
        detail = f"script sha256 {old_digest[:12]} -> {digest[:12]}, checkpoint kept"
        catalog.record(s, spec.name, "redeployed", detail)
        said = f"redeployed {spec.name}; it resumes from its checkpoint"
        if fresh:
            said += f", and its new outputs read their inputs from the beginning: {', '.join(fresh)}"
        return Outcome("redeployed", said, row.checkpoint)
    old_checkpoint = row.checkpoint
    row.checkpoint = new_checkpoint(spec.name)
    row.events_in = row.events_out = 0
    row.progress = None
    row.last_batch = row.last_batch_at = row.lag_ms = None
    catalog.record(s, spec.name, "state-reset", f"checkpoint {old_checkpoint} dropped, now {row.checkpoint}")
    catalog.record(
        s, spec.name, "redeployed", f"script sha256 {old_digest[:12]} -> {digest[:12]}, state reset"
    )
    return Outcome(
        "reset", f"redeployed {spec.name} with an empty state (checkpoint {row.checkpoint})", row.checkpoint
    )


def set_desired(catalog: Catalog, name: str, desired: str) -> str:
    """`cep start` / `cep stop`: a message for the user."""
    with catalog.session() as s:
        row = catalog.locked(s, name)
        if row is None:
            raise CatalogError(f"no deployment named '{name}' in the catalog at {catalog.shown}")
        if desired == "stopped":
            if row.desired_state == "stopped":
                return f"{name} is already stopped"
            row.desired_state = "stopped"
            if row.actual_state in ("pending", "failed"):  # nothing runs it: no service to wait for
                row.actual_state = "stopped"
            event_, message = "stop-requested", f"stopping {name}"
        else:
            if row.desired_state == "running" and row.actual_state in ("running", "starting"):
                return f"{name} is already running"
            was = row.actual_state
            row.desired_state = "running"
            if row.actual_state in ("stopped", "failed"):
                row.actual_state = "pending"
            row.restarts = 0
            event_ = "start-requested"
            message = f"restarting {name} (it had failed)" if was == "failed" else f"starting {name}"
        row.revision += 1
        row.updated_at = now()
        catalog.record(s, name, event_)
        return message


def undeploy(catalog: Catalog, name: str) -> str:
    with catalog.session() as s:
        row = catalog.locked(s, name)
        if row is None:
            raise CatalogError(f"no deployment named '{name}' in the catalog at {catalog.shown}")
        checkpoint = row.checkpoint
        s.delete(row)
        catalog.record(s, name, "undeployed", f"checkpoint {checkpoint} to be deleted by the service")
    return f"undeployed {name}; the service stops it and deletes its checkpoint ({checkpoint})"
