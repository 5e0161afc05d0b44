"""Helpers for the service tests: catalogs, the CLI in-process, scripts.

(A module of its own, not conftest: `from conftest import` would pick whichever conftest.py pytest
imported last.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from deployer.cli import cli

CALLS = """-- calls of 10 s and more, priced
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp TIMESTAMP BY ts;
CREATE WINDOW per_minute AS TIME SIZE 1 MINUTE ADVANCE 1 MINUTE;
INSERT INTO priced SELECT id, caller, duration * 2 AS cost, ts FROM calls WHERE duration >= 10;
INSERT INTO per_caller SELECT caller, sum(cost) AS total FROM priced WINDOW per_minute GROUP BY caller;
"""


def cep(*args: str, catalog: str | None = None) -> Result:
    argv = list(args) + (["--catalog", catalog] if catalog else [])
    return CliRunner().invoke(cli, argv, catch_exceptions=False)


def ok(*args: str, catalog: str | None = None) -> str:
    result = cep(*args, catalog=catalog)
    assert result.exit_code == 0, result.output
    return result.output


def status_json(name: str, catalog: str) -> dict[str, Any]:
    return dict(json.loads(ok("status", name, "--json", catalog=catalog)))


def write_script(directory: Path, text: str, name: str = "script.cpl") -> str:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def deploy_args(script: str, name: str, tmp: Path, extra: Sequence[str] = ()) -> list[str]:
    return [
        "deploy",
        script,
        "--name",
        name,
        "--source",
        f"calls=file:{tmp / 'in'}",
        "--sink",
        f"priced=file:{tmp / 'out'}",
        "--sink",
        f"per_caller=file:{tmp / 'agg'}",
        *extra,
    ]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
