"""What `cep` imports before it does anything stays what the command needs: every `cep run`, `cep
check` and `cep explain` pays its imports before its first line of work (the service's catalog ORM
and rich's console were about a fifth of a second of each, docs/architecture.md, "What a run costs
on Spark"). A data store's drivers wait until a store of that kind is opened (stores/registry.py):
the Redis client, psycopg and SQLAlchemy (with pandas, which a `pa.scalar` made at import time
pulled in) were ~1 s of every run's start, a script with no data store included, on the two cores
the JVM is starting on meanwhile (deployer.spark.run.launch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import io, json, sys
import deployer.cli.main
from deployer.spark.run.reporter import Reporter
from deployer.spark.run.deployment import SparkDeployment
Reporter(io.StringIO(), total=1).close()  # a run whose output is not a terminal
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("rich", "sqlalchemy", "deployer"))))
"""
DRIVERS = ("pandas", "psycopg", "psycopg_pool", "sqlalchemy")

# what `cep run --engine spark` imports before its session: the CLI, the engine and the deployment
_BEFORE_SESSION = """
import json, sys
import deployer.cli.main, deployer.spark.engine, deployer.spark.run.deployment
from stores.registry import StoreRegistry
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""

# a SQLite store opened: the SQL store's modules are imported then
_OPENED = """
import json, sys, tempfile
from operators.graph import DataStore
from stores.bindings import StoreBindings
from stores.registry import StoreRegistry
from stores.urls import parse_store_url
with tempfile.TemporaryDirectory() as d:
    url = parse_store_url(f"sqlite:///{d}/db.sqlite3")
    registry = StoreRegistry(StoreBindings({"db": url}, {"db": DataStore("db", "sqlite")}))
    before = {m.split(".")[0] for m in sys.modules}
    registry.store("db")
    registry.close()
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} - before)))
"""


def _imported(probe: str = _PROBE) -> list[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}  # no FORCE_COLOR or TTY_COMPATIBLE
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_run_imports_neither_the_catalog_orm_nor_rich_off_a_terminal() -> None:
    modules = _imported()
    assert not [m for m in modules if m.startswith("rich")], modules
    assert not [m for m in modules if m.startswith("sqlalchemy.orm")], modules
    assert "deployer.spark.run.deployment" in modules  # the probe sees imports


def test_a_run_imports_no_store_driver_before_it_opens_a_store() -> None:
    imported = set(_imported(_BEFORE_SESSION))
    assert {"deployer", "pyspark", "stores"} <= imported  # the probe did import the run's modules
    assert imported & set(DRIVERS) == set()


def test_opening_a_sql_store_imports_its_drivers() -> None:
    assert "sqlalchemy" in _imported(_OPENED)


def test_the_service_commands_are_still_there_when_asked_for() -> None:
    from click.testing import CliRunner

    from deployer.cli import cli

    assert {"deploy", "ls", "serve", "undeploy", "db"} <= set(cli.list_commands(None))  # type: ignore[arg-type]
    got = CliRunner().invoke(cli, ["deploy", "--help"])
    assert got.exit_code == 0 and "--name" in got.output, got.output
