"""`cep check` and `cep explain`, as a user runs them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from deployer.cli import cli
from deployer.cli.main import _compile

ROOT = Path(__file__).resolve().parents[2]
BILLING = str(ROOT / "examples" / "billing.cpl")


def test_check_valid_script_exits_0() -> None:
    result = CliRunner().invoke(cli, ["check", BILLING])
    assert result.exit_code == 0, result.output
    assert "ok (2 input streams, 4 operators)" in result.output


def test_check_reports_every_error_with_position(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cpl"
    bad.write_text(
        "CREATE STREAMSCHEMA s WITH a integer;\n"
        "INSERT INTO x SELECT b FROM s;\n"
        "INSERT INTO y SELECT a FROM nowhere;\n"
    )
    result = CliRunner().invoke(cli, ["check", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:2:22: error: unknown field 'b'" in result.output
    assert f"{bad}:3:29: error: unknown stream 'nowhere'" in result.output
    assert "2 errors found" in result.output
    assert "Traceback" not in result.output


def test_check_missing_file_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["check", "/no/such/script.cpl"])
    assert result.exit_code == 2
    assert "no such script: /no/such/script.cpl" in result.output


def test_explain_json_has_nodes_and_edges() -> None:
    result = CliRunner().invoke(cli, ["explain", BILLING, "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    ops = [n["op"] for n in doc["nodes"]]
    assert ops == ["Source", "Source", "Union", "Filter", "Map", "Aggregate", "Sink"]
    agg = doc["nodes"][5]
    assert agg["params"]["window"] == "TIME SIZE 1 DAY ADVANCE 1 DAY"
    assert agg["schema"] == [{"name": "idcaller", "type": "integer"}, {"name": "total", "type": "bigint"}]
    assert agg["line"] == 12
    assert {"from": "n1", "port": 0, "to": "n3"} in doc["edges"]


def test_explain_mermaid_is_a_flowchart() -> None:
    result = CliRunner().invoke(cli, ["explain", BILLING, "--format", "mermaid"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "flowchart LR"
    assert '    n3["Union"]' in lines
    assert "    n5 -->|costs| n6" in lines


def test_console_script_is_installed() -> None:
    cep = shutil.which("cep") or str(Path(ROOT / ".venv" / "bin" / "cep"))
    out = subprocess.run([cep, "explain", BILLING], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("n1 = Source()  -- line 4\n")


def test_cep_starts_without_the_engines_and_store_drivers() -> None:
    """`cep check`, `explain`, `deploy` or a local run need neither Spark, pandas nor a store's
    driver: importing the CLI does not import them (each cost a `cep` process a part of a second
    at start; the Spark engine, the service and the describer import them when they run). A fresh
    interpreter, since this one has imported everything already."""
    heavy = ("pyspark", "pandas", "pyarrow", "numpy", "psycopg", "redis")
    code = f"import sys, deployer.cli; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


# Two TIME windows whose rows meet in a Union without event time: on Spark one query, one watermark
# (docs/language.md, "A window beside another stream's rows"); and a stream nothing reads.
HELD = (
    "CREATE STREAMSCHEMA s1 WITH k integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA s2 WITH k integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA unused WITH x integer;\n"
    "INSERT INTO a1 SELECT k, count(*) AS n FROM s1 WINDOW TIME SIZE 1 SECOND GROUP BY k;\n"
    "INSERT INTO a2 SELECT k, count(*) AS n FROM s2 WINDOW TIME SIZE 1 SECOND GROUP BY k;\n"
    "INSERT INTO u SELECT * FROM a1, a2;\n"
)


def test_a_warning_about_spark_is_not_printed_for_a_local_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cep check` prints every warning; `cep run --engine local` leaves out those about Spark's
    plans, which do not apply to it, and keeps the others."""
    monkeypatch.chdir(tmp_path)  # the run's dead letters and data under the test's own directory
    script = tmp_path / "held.cpl"
    script.write_text(HELD)
    for s, second in (("s1", 1), ("s2", 3)):
        (tmp_path / s).mkdir()
        (tmp_path / s / "e.jsonl").write_text(
            json.dumps({"k": 1, "ts": f"2026-01-01T00:00:0{second}Z"}) + "\n"
        )
    spark_only = "on Spark this TIME window also waits for the watermark"
    unread = "stream 'unused' is declared but no statement reads it"

    checked = CliRunner().invoke(cli, ["check", str(script)])
    assert checked.exit_code == 0, checked.output
    assert checked.output.count(spark_only) == 2 and unread in checked.output

    sources = [f"--source={s}=file:{tmp_path / s}" for s in ("s1", "s2")]
    local = CliRunner().invoke(
        cli, ["run", str(script), "--engine", "local", *sources, "--sink", "u=console", "--until-idle"]
    )
    assert local.exit_code == 0, local.output
    assert unread in local.output
    assert spark_only not in local.output


def test_a_run_on_spark_prints_the_warning_about_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `cep run` on Spark (its default engine) prints of the script's warnings before it runs."""
    script = tmp_path / "held.cpl"
    script.write_text(HELD)
    _compile(str(script), {}, engine="spark")
    said = capsys.readouterr().err
    assert said.count("on Spark this TIME window also waits for the watermark") == 2
    assert "stream 'unused' is declared but no statement reads it" in said
