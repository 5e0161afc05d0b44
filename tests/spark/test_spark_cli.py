"""`cep run` options that only the Spark engine has, through the command line itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from spark_helpers import at, write_files

from deployer.cli import cli

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA s WITH k integer, ts timestamp;
INSERT INTO out SELECT k FROM s WHERE k > 0;
"""


def test_max_files_per_trigger_makes_one_batch_per_file(spark: Any, tmp_path: Path) -> None:
    script = tmp_path / "s.cpl"
    script.write_text(SCRIPT)
    write_files(tmp_path / "in", [[{"k": f * 10 + i, "ts": at(i)} for i in range(5)] for f in range(3)])
    checkpoint = tmp_path / "ck"
    args = [
        "run",
        str(script),
        "--source",
        f"s=file:{tmp_path / 'in'}",
        "--sink",
        f"out=file:{tmp_path / 'out'}",
        "--until-idle",
        "--checkpoint",
        str(checkpoint),
        "--max-files-per-trigger",
        "1",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    commits = sorted(int(p.name) for p in (checkpoint / "sink_out" / "commits").iterdir() if p.name.isdigit())
    assert commits == [0, 1, 2]
    written = [line for f in (tmp_path / "out").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(written) == 14  # 15 events, k = 0 filtered out


def test_max_files_per_trigger_must_be_positive(tmp_path: Path) -> None:
    script = tmp_path / "s.cpl"
    script.write_text(SCRIPT)
    result = CliRunner().invoke(
        cli, ["run", str(script), "--source", "s=file:x", "--max-files-per-trigger", "0"]
    )
    assert result.exit_code == 2
    assert "--max-files-per-trigger" in result.output and "0" in result.output
