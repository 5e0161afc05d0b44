"""What `cep` imports before it does anything stays what the command needs: every `cep run`, `cep
check` and `cep explain` pays its imports before its first line of work (the service's catalog ORM
and rich's console were about a fifth of a second of each, docs/architecture.md, "What a run costs
on Spark")."""

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
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("rich", "sqlalchemy"))))
"""


def _imported() -> list[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}  # no FORCE_COLOR or TTY_COMPATIBLE
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_run_imports_neither_the_catalog_orm_nor_rich_off_a_terminal() -> None:
    modules = _imported()
    assert not [m for m in modules if m.startswith("rich")], modules
    assert not [m for m in modules if m.startswith("sqlalchemy.orm")], modules
    assert "sqlalchemy" in modules  # the stores' SQL layer itself is needed: the probe sees imports


def test_the_service_commands_are_still_there_when_asked_for() -> None:
    from click.testing import CliRunner

    from deployer.cli import cli

    assert {"deploy", "ls", "serve", "undeploy", "db"} <= set(cli.list_commands(None))  # type: ignore[arg-type]
    got = CliRunner().invoke(cli, ["deploy", "--help"])
    assert got.exit_code == 0 and "--name" in got.output, got.output
