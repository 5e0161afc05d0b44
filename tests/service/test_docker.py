"""docker/: what can be checked without a Docker engine (none runs here or in CI)."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from deployer.cli import service as service_cli
from stores.urls import parse_store_url

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DOCKER / "compose.yaml").read_text()))


def test_compose_has_every_service_with_a_health_check() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", "spark-master", "spark-worker", "cep"}
    for name, svc in services.items():
        assert "test" in svc.get("healthcheck", {}), name
    cep = services["cep"]
    assert {k: v["condition"] for k, v in cep["depends_on"].items()} == {
        "postgres": "service_healthy",
        "redis": "service_healthy",
        "spark-worker": "service_healthy",
    }
    # Checkpoints and file paths must be the same for the driver and the executors.
    assert cep["volumes"] == services["spark-worker"]["volumes"]
    # The password comes from the environment (PGPASSWORD), not from the URL.
    assert parse_store_url(cep["environment"]["CEP_CATALOG_URL"]).password is None
    assert "PGPASSWORD" in cep["environment"]


def test_compose_commands_parse_with_the_cli() -> None:
    services = compose()["services"]
    script = services["cep"]["command"][-1]
    steps = [shlex.split(part) for part in script.replace("exec ", "").split("&&")]
    assert [s[:3] for s in steps] == [["cep", "db", "upgrade"], ["cep", "serve", "--master"]]
    service_cli.db_upgrade.make_context("upgrade", steps[0][3:])
    service_cli.serve.make_context("serve", steps[1][2:])
    service_cli.serve.make_context("serve", services["cep"]["healthcheck"]["test"][3:])
    assert services["cep"]["healthcheck"]["test"][1:3] == ["cep", "serve"]


def test_dockerfile_installs_the_project_and_runs_the_service() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert "openjdk-17-jre-headless" in text
    assert re.search(r"^RUN pip install \.", text, re.M)
    assert re.search(r'^CMD \["cep", "serve"\]', text, re.M)
    # What the build reads, and every folder the project ships as a package (setup.py), is copied
    # into the image and let through the ignore file.
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    assert re.search(r"^COPY pyproject\.toml setup\.py README\.md \./$", text, re.M)
    assert {"!pyproject.toml", "!setup.py", "!README.md"} <= set(ignore)
    tops = shipped_folders()
    assert tops == {p.parent.name for p in ROOT.glob("*/__init__.py")}, "setup.py misses a package"
    for top in tops:
        assert f"COPY {top} ./{top}" in text, top
        assert f"!{top}/" in ignore, top


def shipped_folders() -> set[str]:
    """The top-level folders setup.py ships: PACKAGES as they are, RENAMED's under another name."""
    found: dict[str, Any] = {}
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return {*found["PACKAGES"], *found["RENAMED"].values()}
