"""The service commands of `cep`: a catalog of deployments and the service that runs them.

    cep db upgrade [--catalog URL]                       create or migrate the catalog
    cep deploy SCRIPT --name N --source S=URI ...        compile, check, record; the service runs it
    cep ls | status NAME | stop NAME | start NAME | undeploy NAME
    cep serve [--catalog URL] [--master URL] [--poll S]  run every deployment that should run

The catalog is `--catalog URL`, else $CEP_CATALOG_URL, else SQLite at $CEP_DATA_DIR/catalog.sqlite3.
Registered on the `cep` group by deployer/cli/main.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import click

from cpl.errors import CompileError
from deployer.cli.common import friendly, pairs, read_script
from deployer.runner import compile_bound
from deployer.service import lifecycle
from deployer.service.catalog import Catalog, CatalogError, now, utc
from deployer.service.lifecycle import DeploySpec
from deployer.service.lifecycle import deploy as do_deploy
from deployer.service.models import Deployment

catalog_option = click.option(
    "--catalog",
    metavar="URL",
    default=None,
    help="Catalog database: postgresql://... or sqlite:///path (default: $CEP_CATALOG_URL, "
    "else $CEP_DATA_DIR/catalog.sqlite3).",
)


_handled = friendly(CatalogError)
_pairs = pairs


def _ago(ts: datetime | None) -> str:
    if ts is None:
        return "never"
    seconds = max(0.0, (now() - (utc(ts) or ts)).total_seconds())
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _iso(ts: datetime | None) -> str | None:
    ts = utc(ts)
    return ts.isoformat().replace("+00:00", "Z") if ts else None


# ---------------------------------------------------------------------------------------------
# cep db


@click.group()
def db() -> None:
    """The catalog database."""


@db.command("upgrade")
@catalog_option
@_handled
def db_upgrade(catalog: str | None) -> None:
    """Create the catalog's tables, or migrate them to this version of cep."""
    cat = Catalog.open(catalog, migrated=False, create=True)
    try:
        before, after = cat.upgrade()
    finally:
        cat.close()
    if before == after:
        click.echo(f"the catalog at {cat.shown} is up to date (revision {after})")
    else:
        click.echo(f"migrated the catalog at {cat.shown}: {before or 'empty'} -> {after}")


# ---------------------------------------------------------------------------------------------
# cep deploy


_read_script = read_script


@click.command()
@click.argument("script")
@click.option("--name", required=True, help="The deployment's name: a letter, then letters, digits, _ or -.")
@click.option(
    "--source", "sources", multiple=True, metavar="STREAM=URI", help="Input of a stream (file:DIR)."
)
@click.option("--sink", "sinks", multiple=True, metavar="STREAM=URI", help="Output of a stream (file:DIR).")
@click.option("--store", "stores", multiple=True, metavar="NAME=URL", help="Bind a data store (no password).")
@click.option("--dead-letter", metavar="URI", help="Where bad events go (default: beside the first sink).")
@click.option("--reset-state", is_flag=True, help="Drop the checkpoint: start from an empty state.")
@catalog_option
@_handled
def deploy(
    script: str,
    name: str,
    sources: Sequence[str],
    sinks: Sequence[str],
    stores: Sequence[str],
    dead_letter: str | None,
    reset_state: bool,
    catalog: str | None,
) -> None:
    """Compile SCRIPT and deploy it as NAME; `cep serve` runs it.

    Deploying an existing NAME again replaces its script and keeps its checkpoint when the new script
    can resume from it; a change of a window, a GROUP BY, an input's schema or the set of stateful
    operators cannot, and is refused unless --reset-state is given.
    """
    source, filename = _read_script(script)
    bound = _pairs(stores, "--store")
    try:
        # the stores bound here as the service will bind them, for the result types of the SELECTs
        # (cpl.describe); one not reachable from here leaves them varchar, with a warning
        compiled = compile_bound(source, filename, bound)
    except CompileError as err:
        click.echo(err.render(), err=True)
        raise SystemExit(1) from None
    for w in compiled.warnings:
        click.echo(w.render(source, filename), err=True)
    spec = DeploySpec(
        name=name,
        script=source,
        sources=_pairs(sources, "--source"),
        sinks=_pairs(sinks, "--sink"),
        stores=bound,
        dead_letter=dead_letter,
    )
    cat = Catalog.open(catalog)
    try:
        outcome = do_deploy(cat, spec, compiled.graph, reset_state)
    finally:
        cat.close()
    click.echo(outcome.message)


# ---------------------------------------------------------------------------------------------
# cep ls / status


def _row_json(row: Deployment) -> dict[str, Any]:
    return {
        "name": row.name,
        "desired_state": row.desired_state,
        "state": row.actual_state,
        "revision": row.revision,
        "script_sha256": row.script_hash,
        "bindings": row.bindings,
        "checkpoint": row.checkpoint,
        "events_in": row.events_in,
        "events_out": row.events_out,
        "last_batch": row.last_batch,
        "last_batch_at": _iso(row.last_batch_at),
        "lag_ms": row.lag_ms,
        "restarts": row.restarts,
        "last_error": row.last_error,
        "last_error_at": _iso(row.last_error_at),
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
    }


def _state(row: Deployment) -> str:
    if row.actual_state == row.desired_state or (
        row.desired_state == "running" and row.actual_state == "failed"
    ):
        return row.actual_state
    return f"{row.actual_state} -> {row.desired_state}"


@click.command("ls")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: a list of deployments.")
@catalog_option
@_handled
def ls(as_json: bool, catalog: str | None) -> None:
    """List the deployments."""
    cat = Catalog.open(catalog)
    try:
        rows = cat.deployments()
    finally:
        cat.close()
    if as_json:
        click.echo(json.dumps([_row_json(r) for r in rows], indent=2))
        return
    if not rows:
        click.echo("no deployments (add one with `cep deploy SCRIPT --name NAME ...`)")
        return
    table = [("NAME", "STATE", "IN", "OUT", "RESTARTS", "UPDATED")]
    for r in rows:
        table.append(
            (r.name, _state(r), str(r.events_in), str(r.events_out), str(r.restarts), _ago(r.updated_at))
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="The deployment and its history as JSON.")
@click.option("--history", "history_len", default=10, show_default=True, help="How many history entries.")
@catalog_option
@_handled
def status(name: str, as_json: bool, history_len: int, catalog: str | None) -> None:
    """State, counters, lag and last error of the deployment NAME."""
    cat = Catalog.open(catalog)
    try:
        row = cat.require(name)
        history = cat.history(name, history_len, since=row.created_at)  # not a former namesake's
        service = cat.last_service()
    finally:
        cat.close()
    if as_json:
        doc = _row_json(row)
        doc["history"] = [{"at": _iso(h.at), "event": h.event, "detail": h.detail} for h in history]
        doc["service_seen_at"] = _iso(service.seen_at) if service else None
        click.echo(json.dumps(doc, indent=2))
        return
    b = row.bindings
    lines = [
        ("name", row.name),
        ("state", f"{row.actual_state} (desired: {row.desired_state})"),
        (
            "script",
            f"sha256 {row.script_hash[:12]}, {len(row.script.splitlines())} lines, revision {row.revision}",
        ),
        ("sources", ", ".join(f"{k}={v}" for k, v in b.get("sources", {}).items()) or "-"),
        ("sinks", ", ".join(f"{k}={v}" for k, v in b.get("sinks", {}).items()) or "-"),
        ("stores", ", ".join(f"{k}={v}" for k, v in b.get("stores", {}).items()) or "-"),
        ("checkpoint", row.checkpoint),
        ("events in", str(row.events_in)),
        ("events out", str(row.events_out)),
        (
            "last batch",
            f"{row.last_batch} ({_ago(row.last_batch_at)})" if row.last_batch is not None else "-",
        ),
        ("lag", f"{row.lag_ms} ms" if row.lag_ms is not None else "-"),
        ("restarts", str(row.restarts)),
        ("last error", f"({_ago(row.last_error_at)}) {row.last_error}" if row.last_error else "-"),
        ("created", _iso(row.created_at) or "-"),
        ("updated", _iso(row.updated_at) or "-"),
        ("service", _service_line(service)),
    ]
    width = max(len(k) for k, _ in lines) + 1
    for k, v in lines:
        click.echo(f"{(k + ':').ljust(width)} {v}")
    if history:
        click.echo("history:")
        for h in history:
            click.echo(f"  {_iso(h.at)}  {h.event}" + (f"  {h.detail}" if h.detail else ""))


def _service_line(service: Any) -> str:
    if service is None:
        return "none has run on this catalog (start one with `cep serve`)"
    age = (now() - (utc(service.seen_at) or now())).total_seconds()
    stale = " (not running? it reports every few seconds)" if age > 60 else ""
    return f"{service.instance}, seen {_ago(service.seen_at)}{stale}"


# ---------------------------------------------------------------------------------------------
# cep stop / start / undeploy


def _lifecycle(action: str) -> Callable[[str, str | None], None]:
    def run(name: str, catalog: str | None) -> None:
        cat = Catalog.open(catalog)
        try:
            if action == "undeploy":
                message = lifecycle.undeploy(cat, name)
            else:
                message = lifecycle.set_desired(cat, name, "stopped" if action == "stop" else "running")
        finally:
            cat.close()
        click.echo(message)

    return run


@click.command()
@click.argument("name")
@catalog_option
@_handled
def stop(name: str, catalog: str | None) -> None:
    """Stop the deployment NAME; its checkpoint is kept, `cep start` resumes it."""
    _lifecycle("stop")(name, catalog)


@click.command()
@click.argument("name")
@catalog_option
@_handled
def start(name: str, catalog: str | None) -> None:
    """Start the deployment NAME again (also: retry a failed one now)."""
    _lifecycle("start")(name, catalog)


@click.command()
@click.argument("name")
@catalog_option
@_handled
def undeploy(name: str, catalog: str | None) -> None:
    """Remove the deployment NAME; the service stops it and deletes its checkpoint."""
    _lifecycle("undeploy")(name, catalog)


# ---------------------------------------------------------------------------------------------
# cep serve


@click.command()
@catalog_option
@click.option("--master", metavar="URL", default=None, help="Spark master (default local[*]).")
@click.option("--poll", type=float, default=2.0, show_default=True, help="Seconds between catalog checks.")
@click.option("--check", is_flag=True, help="Exit 0 when a service has reported to the catalog recently.")
@_handled
def serve(catalog: str | None, master: str | None, poll: float, check: bool) -> None:
    """Run every deployment of the catalog whose desired state is running, in one Spark application."""
    if poll <= 0:
        raise click.UsageError("--poll must be positive")
    cat = Catalog.open(catalog)
    if check:
        try:
            service = cat.last_service()
        finally:
            cat.close()
        if service is None or (now() - (utc(service.seen_at) or now())).total_seconds() > max(30.0, 5 * poll):
            click.echo(f"no service has reported to {cat.shown} recently", err=True)
            raise SystemExit(1)
        click.echo(f"service {service.instance} seen {_ago(service.seen_at)}")
        return
    # Here, not at the top: the service brings Spark, pandas and the whole engine with it, which no
    # other `cep` command needs (every `cep` process imported them: 0.3 s of its start-up, measured
    # with python -X importtime on a quiet machine).
    from deployer.service.daemon import Service

    raise SystemExit(Service(cat, master=master, poll=poll).run())


COMMANDS = (db, deploy, ls, status, stop, start, undeploy, serve)
