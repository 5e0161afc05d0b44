"""Golden tests: each script in golden/ compiles to the plan in its .plan file; each script in errors/
fails with exactly the diagnostics in its .err file.

Regenerate after an intended change with `CEP_UPDATE_GOLDEN=1 pytest tests/cpl/test_golden.py`, then
read the diff: a golden file is only as good as the review of its contents.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cpl.compiler import compile_script
from cpl.errors import CompileError
from operators.explain import to_text

HERE = Path(__file__).parent
UPDATE = os.environ.get("CEP_UPDATE_GOLDEN") == "1"


def _compare(actual: str, expected_file: Path) -> None:
    if UPDATE:
        expected_file.write_text(actual, encoding="utf-8")
    assert expected_file.exists(), f"missing {expected_file.name}; run with CEP_UPDATE_GOLDEN=1"
    assert actual == expected_file.read_text(encoding="utf-8")


@pytest.mark.parametrize("script", sorted((HERE / "golden").glob("*.cpl")), ids=lambda p: p.stem)
def test_plan(script: Path) -> None:
    compiled = compile_script(script.read_text(encoding="utf-8"), script.name)
    _compare(to_text(compiled.graph), script.with_suffix(".plan"))


@pytest.mark.parametrize("script", sorted((HERE / "errors").glob("*.cpl")), ids=lambda p: p.stem)
def test_diagnostics(script: Path) -> None:
    with pytest.raises(CompileError) as info:
        compile_script(script.read_text(encoding="utf-8"), script.name)
    _compare(info.value.render() + "\n", script.with_suffix(".err"))
