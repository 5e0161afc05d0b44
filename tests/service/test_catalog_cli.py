"""The deployment commands against a real catalog: SQLite and PostgreSQL (no Spark here)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from service_helpers import CALLS, cep, deploy_args, ok, status_json, write_script

from cpl.compiler import compile_script
from deployer.service.catalog import Catalog
from deployer.service.lifecycle import DeploySpec, deploy


def events(catalog: str, name: str) -> list[str]:
    cat = Catalog.open(catalog)
    try:
        return [h.event for h in cat.history(name)]
    finally:
        cat.close()


def test_lifecycle(catalog_url: str, tmp_path: Path) -> None:
    script = write_script(tmp_path, CALLS)
    assert "migrated the catalog" in ok("db", "upgrade", catalog=catalog_url)
    assert "is up to date (revision 0001)" in ok("db", "upgrade", catalog=catalog_url)
    assert "no deployments" in ok("ls", catalog=catalog_url)
    check = cep("serve", "--check", catalog=catalog_url)
    assert check.exit_code == 1 and "no service has reported" in check.output

    out = ok(*deploy_args(script, "billing", tmp_path), catalog=catalog_url)
    assert out.startswith("deployed billing (checkpoint checkpoints/billing/")
    listing = ok("ls", catalog=catalog_url).splitlines()
    assert listing[0].split() == ["NAME", "STATE", "IN", "OUT", "RESTARTS", "UPDATED"]
    assert listing[1].split()[:4] == ["billing", "pending", "->", "running"]

    doc = status_json("billing", catalog_url)
    assert (doc["state"], doc["desired_state"], doc["revision"]) == ("pending", "running", 1)
    assert doc["bindings"]["sources"] == {"calls": f"file:{tmp_path / 'in'}"}
    assert doc["checkpoint"].startswith("checkpoints/billing/")
    text = ok("status", "billing", catalog=catalog_url)
    assert "state:      pending (desired: running)" in text
    assert "events in:  0" in text and "last error: -" in text
    assert "service:    none has run on this catalog (start one with `cep serve`)" in text

    assert ok("stop", "billing", catalog=catalog_url).strip() == "stopping billing"
    assert ok("stop", "billing", catalog=catalog_url).strip() == "billing is already stopped"
    doc = status_json("billing", catalog_url)
    assert (doc["state"], doc["desired_state"], doc["revision"]) == ("stopped", "stopped", 2)
    assert ok("start", "billing", catalog=catalog_url).strip() == "starting billing"
    doc = status_json("billing", catalog_url)
    assert (doc["state"], doc["desired_state"], doc["revision"]) == ("pending", "running", 3)

    assert ok("undeploy", "billing", catalog=catalog_url).startswith("undeployed billing")
    assert "no deployments" in ok("ls", catalog=catalog_url)
    gone = cep("status", "billing", catalog=catalog_url)
    assert gone.exit_code == 1 and "no deployment named 'billing'" in gone.output
    assert events(catalog_url, "billing") == ["deployed", "stop-requested", "start-requested", "undeployed"]

    # A new deployment of the same name starts afresh: a checkpoint and a history of its own.
    ok(*deploy_args(script, "billing", tmp_path), catalog=catalog_url)
    again = status_json("billing", catalog_url)
    assert again["checkpoint"] != doc["checkpoint"]
    assert [h["event"] for h in again["history"]] == ["deployed"]


def test_unmigrated_catalog_is_refused(catalog_url: str, tmp_path: Path) -> None:
    if catalog_url.startswith("sqlite"):
        sqlite3.connect(catalog_url.removeprefix("sqlite:///")).close()  # exists, has no tables
        shown = catalog_url
    else:
        # A password must not be echoed back (the test server trusts every connection).
        catalog_url = catalog_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
        shown = catalog_url.replace(":s3cret@", ":***@")
    script = write_script(tmp_path, CALLS)
    for args in (
        ["ls"],
        ["status", "x"],
        ["stop", "x"],
        ["start", "x"],
        ["undeploy", "x"],
        ["serve"],
        deploy_args(script, "x", tmp_path),
    ):
        result = cep(*args, catalog=catalog_url)
        assert result.exit_code == 1, (args, result.output)
        assert result.output.strip() == (
            f"error: the catalog at {shown} is not migrated: run `cep db upgrade --catalog {shown}`"
        ), args
        assert "s3cret" not in result.output


def test_missing_default_catalog_is_refused_and_not_created(data_dir: Path) -> None:
    result = cep("ls")
    assert result.exit_code == 1
    assert f"the catalog at sqlite:///{data_dir.resolve()}/catalog.sqlite3 is not migrated" in result.output
    assert not (data_dir / "catalog.sqlite3").exists()
    ok("db", "upgrade")
    assert "no deployments" in ok("ls")


def test_invalid_script_is_refused_with_diagnostics(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    ok("db", "upgrade", catalog=catalog)
    bad = write_script(tmp_path, CALLS.replace("duration >= 10", "duraton >= 10"), "bad.cpl")
    result = cep(*deploy_args(bad, "billing", tmp_path), catalog=catalog)
    assert result.exit_code == 1
    assert f"{bad}:4:81: error: unknown field 'duraton'" in result.output
    assert "1 error found" in result.output
    assert "no deployments" in ok("ls", catalog=catalog)


def test_bindings_are_checked_and_passwords_refused(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    ok("db", "upgrade", catalog=catalog)
    with_store = CALLS + (
        "CREATE DATASTORE crm TYPE postgresql;\n"
        "CREATE TABLE totals (caller integer, total bigint) IN crm;\n"
        "INSERT INTO TABLE totals SELECT caller, total FROM per_caller;\n"
    )
    script = write_script(tmp_path, with_store)
    secret = cep(
        *deploy_args(script, "b", tmp_path, ["--store", "crm=postgresql://app:hunter2@db/crm"]),
        catalog=catalog,
    )
    assert secret.exit_code == 1
    assert "--store crm=postgresql://app:***@db/crm contains a password" in secret.output
    assert "password_file" in secret.output and "hunter2" not in secret.output
    unbound = cep("deploy", script, "--name", "b", "--sink", "nope=file:x", catalog=catalog)
    assert unbound.exit_code == 1
    assert "stream 'calls' has no input: add --source calls=file:DIR" in unbound.output
    assert "--sink nope=...: the script has no stream 'nope'" in unbound.output
    # Without the password, with a password file the service reads on its own machine: accepted.
    url = "postgresql://app@db/crm?password_file=/run/secrets/crm"
    ok(*deploy_args(script, "b", tmp_path, ["--store", f"crm={url}"]), catalog=catalog)
    assert status_json("b", catalog)["bindings"]["stores"] == {"crm": url}


def test_redeploy_keeps_or_refuses_the_checkpoint(catalog_url: str, tmp_path: Path) -> None:
    ok("db", "upgrade", catalog=catalog_url)
    ok(*deploy_args(write_script(tmp_path, CALLS), "billing", tmp_path), catalog=catalog_url)
    first = status_json("billing", catalog_url)["checkpoint"]
    same = ok(*deploy_args(write_script(tmp_path, CALLS), "billing", tmp_path), catalog=catalog_url)
    assert same.strip() == "billing is unchanged"

    stateless = write_script(tmp_path, CALLS.replace("duration >= 10", "duration >= 20"), "v2.cpl")
    out = ok(*deploy_args(stateless, "billing", tmp_path), catalog=catalog_url)
    assert out.strip() == "redeployed billing; it resumes from its checkpoint"
    assert status_json("billing", catalog_url)["checkpoint"] == first
    # a new output starts from the beginning of its inputs: the user is told which
    more = write_script(
        tmp_path, CALLS + "INSERT INTO free SELECT id FROM calls WHERE duration < 10;\n", "v2b.cpl"
    )
    out = ok(
        *deploy_args(more, "billing", tmp_path, ["--sink", f"free=file:{tmp_path / 'free'}"]),
        catalog=catalog_url,
    )
    assert out.strip() == (
        "redeployed billing; it resumes from its checkpoint, and its new outputs read their inputs "
        "from the beginning: sink 'free'"
    )

    hourly = write_script(
        tmp_path, CALLS.replace("1 MINUTE ADVANCE 1 MINUTE", "1 HOUR ADVANCE 1 HOUR"), "v3.cpl"
    )
    refused = cep(*deploy_args(hourly, "billing", tmp_path), catalog=catalog_url)
    assert refused.exit_code == 1
    assert f"cannot redeploy billing over its checkpoint ({first})" in refused.output
    assert (
        "window changed from TIME SIZE 1 MINUTE ADVANCE 1 MINUTE to TIME SIZE 1 HOUR ADVANCE 1 HOUR"
        in refused.output
    )
    assert "--reset-state" in refused.output
    doc = status_json("billing", catalog_url)
    assert (doc["revision"], doc["checkpoint"]) == (3, first)  # nothing changed

    out = ok(*deploy_args(hourly, "billing", tmp_path, ["--reset-state"]), catalog=catalog_url)
    assert out.startswith("redeployed billing with an empty state")
    doc = status_json("billing", catalog_url)
    assert doc["revision"] == 4 and doc["checkpoint"] != first
    events = ["deployed", "redeployed", "redeployed", "state-reset", "redeployed"]
    assert [h["event"] for h in doc["history"]] == events


def test_concurrent_deploys_of_one_name_are_serialized(catalog_url: str) -> None:
    ok("db", "upgrade", catalog=catalog_url)
    n = 6
    barrier = threading.Barrier(n)
    actions: list[str] = []
    errors: list[BaseException] = []

    def one(i: int) -> None:
        script = CALLS.replace("duration >= 10", f"duration >= {10 + i}")
        spec = DeploySpec("billing", script, {"calls": "file:in"}, {"priced": "file:out"})
        graph = compile_script(script).graph
        cat = Catalog.open(catalog_url)
        try:
            barrier.wait()
            actions.append(deploy(cat, spec, graph).action)
        except BaseException as err:
            errors.append(err)
        finally:
            cat.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(actions) == ["created"] + ["redeployed"] * (n - 1)
    doc = status_json("billing", catalog_url)
    assert doc["revision"] == n
    assert sorted(h["event"] for h in doc["history"]) == ["deployed"] + ["redeployed"] * (n - 1)


@pytest.mark.postgres
def test_catalog_changes_notify_the_service(pg_db: str, tmp_path: Path) -> None:
    """The trigger: a NOTIFY on every change the service must act on, none for its progress."""
    import psycopg

    ok("db", "upgrade", catalog=pg_db)
    script = write_script(tmp_path, CALLS)
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("LISTEN cep_deployments")

        def heard() -> list[str]:
            return [n.payload for n in conn.notifies(timeout=0.5)]

        ok(*deploy_args(script, "billing", tmp_path), catalog=pg_db)
        assert heard() == ["billing"]
        cat = Catalog.open(pg_db)
        cat.update("billing", events_in=10, events_out=5, actual_state="running")
        cat.close()
        assert heard() == []
        ok("stop", "billing", catalog=pg_db)
        ok("undeploy", "billing", catalog=pg_db)
        assert heard() == ["billing", "billing"]


def test_a_second_service_on_one_catalog_is_refused(catalog_url: str) -> None:
    """Two services would run every deployment twice on one checkpoint; the lock dies with its holder."""
    ok("db", "upgrade", catalog=catalog_url)
    if catalog_url.startswith("sqlite"):
        import fcntl

        holder: Any = open(catalog_url.removeprefix("sqlite:///") + ".serve-lock", "a")  # noqa: SIM115
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:
        import psycopg

        from deployer.service.daemon import SERVICE_LOCK

        holder = psycopg.connect(catalog_url, autocommit=True)
        holder.execute("SELECT pg_advisory_lock(%s)", (SERVICE_LOCK,))
    try:
        result = cep("serve", catalog=catalog_url)
    finally:
        holder.close()
    assert result.exit_code == 1
    assert result.output.startswith("error: another cep serve is serving the catalog at")
    assert result.output.rstrip().endswith(": stop it first")


def test_migrations_go_down_and_up_again(catalog_url: str) -> None:
    from alembic import command

    from deployer.service.migrate import config

    ok("db", "upgrade", catalog=catalog_url)
    cat = Catalog.open(catalog_url)
    try:
        with cat.engine.begin() as conn:
            command.downgrade(config(conn), "base")
        assert cat.revisions()[0] is None
    finally:
        cat.close()
    assert "empty -> 0001" in ok("db", "upgrade", catalog=catalog_url)
    assert "no deployments" in ok("ls", catalog=catalog_url)


def test_a_trigger_is_deployed_without_a_source_and_refuses_one(catalog_url: str, tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        "CREATE TRIGGER every5 AT EVERY 5 MINUTES;\nINSERT INTO ticks SELECT triggered_time FROM every5;\n",
        "ticks.cpl",
    )
    sink = ["--sink", f"ticks=file:{tmp_path / 'out'}"]
    ok("db", "upgrade", catalog=catalog_url)
    refused = cep(
        "deploy", script, "--name", "t1", "--source", f"every5=file:{tmp_path}", *sink, catalog=catalog_url
    )
    assert refused.exit_code == 1
    assert (
        "'every5' is a trigger (CREATE TRIGGER)" in refused.output
        and "it takes no --source" in refused.output
    )
    ok("deploy", script, "--name", "t2", *sink, catalog=catalog_url)
    assert status_json("t2", catalog_url)["name"] == "t2"
