"""Modules stay small enough to read in one sitting and functions small enough to hold in one's head
(docs/architecture.md: modules under ~400 lines, functions under ~60; a module or function that
outgrows these is split by meaning, not by line count), and no module shadows a standard one."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("cpl", "operators", "stores", "deployer", "migrations", "bench")
MODULE_LINES = 420
FUNCTION_LINES = 65


def _modules() -> list[Path]:
    return sorted(p for d in CODE for p in (ROOT / d).rglob("*.py") if "migrations/versions" not in str(p))


def test_modules_are_small() -> None:
    big = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MODULE_LINES
    }
    assert big == {}


def test_functions_are_small() -> None:
    big = {}
    for path in _modules():
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
                if n > FUNCTION_LINES:
                    big[f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}"] = n
    assert big == {}


def test_no_module_is_named_like_a_standard_library_one() -> None:
    """`cpl/ast.py` next to Python's `ast`, `operators/types.py` next to `types`: a reader (and a tool)
    cannot tell them apart in an import."""
    import sys

    names = set(sys.stdlib_module_names)
    clashes = [
        str(p.relative_to(ROOT))
        for p in _modules()
        if (p.stem if p.stem != "__init__" else p.parent.name) in names
    ]
    assert clashes == []
