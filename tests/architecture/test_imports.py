"""The layering of docs/architecture.md holds, and no module imports another in a cycle.

The contracts are in pyproject.toml ([tool.importlinter]); `lint-imports` checks them. The cycle
check here is stricter than the contracts': it works module by module, on every import a module
makes, those inside functions included, so an import moved into a function to dodge a cycle is
still one. Imports inside functions are allowed only where `LAZY` says why.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
# migrations/ is the catalog's Alembic project: importable as `migrations` from the checkout's root
# only (the wheel names it paascep_migrations), and imported by nothing (Alembic loads it by path).
PACKAGES = ("cpl", "operators", "stores", "deployer", "migrations")

# (module, imported module) -> why the import waits for a function to run.
LAZY = {
    ("deployer.connectors.redis_stream", "stores.urls"): "SQLAlchemy, for Spark's Python workers",
    ("deployer.spark.streams.redis_source", "stores.urls"): "SQLAlchemy, for Spark's Python workers",
    ("deployer.cli.service", "deployer.service.daemon"): "Spark, pandas and the engine, for `cep serve` only",
    ("deployer.runner", "stores.sql.describe"): "psycopg and SQLAlchemy, for a script that asks a store",
    ("deployer.spark.engine", "deployer.spark.run.deployment"): "imported while the run's JVM starts",
    ("stores.registry", "stores.sql.store"): "psycopg and SQLAlchemy, once a SQL store is opened",
    ("stores.registry", "stores.redis.store"): "the Redis client, once a Redis store is opened",
}


def test_the_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), and self-imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1 or v in edges.get(v, ()):
                found.append(sorted(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_another_in_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # for `migrations`
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert _cycles(edges) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_imports_inside_functions_are_the_documented_lazy_ones() -> None:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for fn in ast.walk(tree):
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                        names = [node.module]
                    elif isinstance(node, ast.Import):
                        names = [a.name for a in node.names]
                    else:
                        continue
                    found |= {(_module_name(path), n) for n in names if n.split(".")[0] in PACKAGES}
    assert found == set(LAZY), "an import of the project inside a function (say why in LAZY, or move it up)"
