"""ON SQL result types when the stores are bound (cpl.describe): the compiler, `cep check` and `cep
explain`, without a JVM, against real SQLite files (the embedded default) and a real PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from click.testing import CliRunner

from cpl.compiler import compile_script
from cpl.errors import CompileError
from deployer.cli import cli
from operators import graph as g
from operators.analysis import live_fields, unfit_results
from operators.declarations import DataStore
from stores.bindings import StoreBindings, resolve_bindings
from stores.sql.describe import bindings_describer

SCRIPT = """CREATE STREAMSCHEMA calls WITH k integer, idcaller integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT idplan, fee FROM plans WHERE idcaller = ?';
INSERT INTO nextplan SELECT k, p.idplan + 1 AS plan, p.fee * 2 AS fee FROM calls ON SQL plan_of, p, idcaller, idplan, fee;
"""
PLANS = "CREATE TABLE plans (idcaller integer, idplan integer, fee real)"
DECLARED = {"crm": DataStore("crm", "postgresql")}


def sqlite_crm(directory: Path, *ddl: str) -> StoreBindings:
    """`crm` as its embedded default: the SQLite file crm.sqlite3 in `directory`, made by `ddl`."""
    directory.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(directory / "crm.sqlite3") as db:
        for statement in ddl:
            db.execute(statement)
    return resolve_bindings(DECLARED, {}, {}, directory)


def read_node(graph: g.Graph) -> g.ReadSQL:
    return next(n for n in graph.nodes if isinstance(n, g.ReadSQL))


def test_the_types_come_from_the_store_so_arithmetic_type_checks(tmp_path: Path) -> None:
    stores = sqlite_crm(tmp_path, PLANS)
    compiled = compile_script(SCRIPT, describe=bindings_describer(stores))
    assert compiled.warnings == []
    assert str(compiled.graph.node("n3").schema) == "(k integer, plan integer, fee double)"
    read = read_node(compiled.graph)
    assert read.typed_by == "described by data store crm"
    assert [(c.name, str(c.type), c.source) for c in read.query.described or ()] == [
        ("idplan", "integer", "INTEGER"),
        ("fee", "double", "REAL"),
    ]
    # SQLite vouches for no value: every result may not fit, and the dead letter needs the event
    assert unfit_results(read) == (0, 1) and live_fields(compiled.graph)[read.inputs[0]] is None


def test_without_bound_stores_the_results_are_varchar() -> None:
    with pytest.raises(CompileError) as info:
        compile_script(SCRIPT)
    assert "4:32: error: '+' needs numbers, not varchar + integer" in info.value.render()


def test_returns_wins_over_the_store(tmp_path: Path) -> None:
    stores = sqlite_crm(tmp_path, PLANS)
    script = SCRIPT.replace("= ?'", "= ?' RETURNS (idplan bigint, fee decimal(6, 2))")
    read = read_node(compile_script(script, describe=bindings_describer(stores)).graph)
    assert read.typed_by == "RETURNS"
    assert [str(f.type) for f in read.result_fields] == ["bigint", "decimal(6, 2)"]


@pytest.mark.parametrize(
    ("ddl", "why"),
    [
        ((), "no such table: plans"),
        (("CREATE TABLE plans (idcaller integer, other integer)",), "no such column: idplan"),
    ],
)
def test_a_query_the_store_cannot_describe_reads_varchar_with_a_warning(
    tmp_path: Path, ddl: tuple[str, ...], why: str
) -> None:
    stores = sqlite_crm(tmp_path, *ddl)
    script = SCRIPT.replace("p.idplan + 1", "p.idplan || '!'").replace("p.fee * 2", "p.fee")
    compiled = compile_script(script, "s.cpl", describe=bindings_describer(stores))
    [warning] = compiled.warnings
    text = warning.render(script, "s.cpl")
    assert text.startswith(
        f"s.cpl:3:1: warning: the result types of 'plan_of' were not read from data store crm: sqlite:///{tmp_path}/crm.sqlite3: query plan_of: {why}"
    )
    assert text.split("\n")[0].endswith(
        "its result columns are read as varchar (declare RETURNS (...) to type them)"
    )
    assert read_node(compiled.graph).typed_by == "not described: read as varchar"


def test_an_unbound_store_and_a_missing_file_are_not_described_and_nothing_is_created(tmp_path: Path) -> None:
    unbound = StoreBindings({}, DECLARED)
    script = SCRIPT.replace("p.idplan + 1", "p.idplan").replace("p.fee * 2", "p.fee")
    [warning] = compile_script(script, describe=bindings_describer(unbound)).warnings
    assert "data store crm is not bound" in warning.message
    missing = resolve_bindings(DECLARED, {}, {}, tmp_path / "nowhere")
    [warning] = compile_script(script, describe=bindings_describer(missing)).warnings
    assert f"sqlite:///{tmp_path}/nowhere/crm.sqlite3: no such file (yet)" in warning.message
    assert not (tmp_path / "nowhere").exists()


def test_a_column_count_that_differs_from_the_store_is_an_error_at_its_place(tmp_path: Path) -> None:
    stores = sqlite_crm(tmp_path, PLANS)
    fewer = SCRIPT.replace("p.fee * 2 AS fee", "k AS fee").replace("idplan, fee;", "idplan;")
    with pytest.raises(CompileError) as info:
        compile_script(fewer, describe=bindings_describer(stores))
    assert (
        "4:74: error: 'plan_of' returns 2 column(s) (idplan integer, fee double, as data store crm "
        "describes it) but ON SQL names 1"
    ) in info.value.render()
    declared = SCRIPT.replace("= ?'", "= ?' RETURNS (idplan integer)").replace("p.fee * 2 AS fee", "k AS fee")
    with pytest.raises(CompileError) as info:
        compile_script(declared.replace("idplan, fee;", "idplan;"), describe=bindings_describer(stores))
    assert (
        "3:1: error: 'plan_of' RETURNS 1 column(s) but data store crm says it returns 2: idplan integer, fee double"
    ) in info.value.render()


def test_cep_check_and_explain_describe_the_bound_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI binds the stores as `cep run` does: here the embedded default under CEP_DATA_DIR."""
    sqlite_crm(tmp_path / "data", PLANS)
    monkeypatch.setenv("CEP_DATA_DIR", str(tmp_path / "data"))
    script = tmp_path / "s.cpl"
    script.write_text(SCRIPT)
    runner = CliRunner()
    checked = runner.invoke(cli, ["check", str(script)])
    assert checked.exit_code == 0 and checked.output == f"{script}: ok (1 input streams, 2 operators)\n"
    text = runner.invoke(cli, ["explain", str(script)]).output
    assert "    columns: [p.idplan integer, p.fee double]\n    types: described by data store crm\n" in text
    doc = json.loads(runner.invoke(cli, ["explain", str(script), "--format", "json"]).output)
    params = doc["nodes"][1]["params"]
    assert params["columns"] == ["p.idplan integer", "p.fee double"]
    assert params["types"] == "described by data store crm"
    mermaid = runner.invoke(cli, ["explain", str(script), "--format", "mermaid"]).output
    assert 'n2["ReadSQL<br/>plan_of<br/>p.idplan integer, p.fee double"]' in mermaid
    # --store wins over the default: a file without the table leaves the results varchar
    other = tmp_path / "other.sqlite3"
    sqlite3.connect(other).close()
    refused = runner.invoke(cli, ["check", str(script), "--store", f"crm=sqlite:///{other}"])
    assert refused.exit_code == 1
    assert "warning: the result types of 'plan_of' were not read" in refused.output
    assert "error: '+' needs numbers, not varchar + integer" in refused.output


PG_TABLE = """CREATE TABLE plans (idcaller int4, a int2, b int4, c int8, d float4, e float8, f numeric(10, 2),
  g numeric, h numeric(5, -2), i text, j varchar(5), k char(3), l bool, m timestamp, n timestamptz, o date,
  p uuid, q jsonb, r bytea, s interval, t int4[])"""


@pytest.mark.postgres
def test_postgresql_types_map_to_cpl_types(pg_db: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute(PG_TABLE)
    stores = resolve_bindings(DECLARED, {"crm": pg_db}, {}, tmp_path)
    names = "a b c d e f g h i j k l m n o p q r s t".split()
    script = (
        "CREATE STREAMSCHEMA calls WITH idcaller integer;\nCREATE DATASTORE crm TYPE postgresql;\n"
        f"CREATE SQLQUERY q ON crm AS 'SELECT {', '.join(names)}, ? IS NULL AS u FROM plans WHERE idcaller = ?';\n"
        f"INSERT INTO o SELECT * FROM calls ON SQL q, x, idcaller, idcaller, {', '.join(names)}, u;\n"
    )
    compiled = compile_script(script, describe=bindings_describer(stores))
    assert compiled.warnings == []
    described = read_node(compiled.graph).query.described or ()
    got = [(c.name, str(c.type), c.exact) for c in described]
    assert got == [
        ("a", "integer", True),
        ("b", "integer", True),
        ("c", "bigint", True),
        ("d", "double", True),
        ("e", "double", True),
        ("f", "decimal(10, 2)", False),  # NaN
        ("g", "decimal(38, 18)", False),
        ("h", "decimal(7, 0)", False),  # a negative scale: hundreds
        ("i", "varchar", True),
        ("j", "varchar", True),
        ("k", "varchar", True),
        ("l", "boolean", True),
        ("m", "timestamp", True),
        ("n", "timestamp", True),
        ("o", "timestamp", True),
        ("p", "varchar", True),
        ("q", "varchar", True),
        ("r", "varchar", True),
        ("s", "varchar", True),
        ("t", "varchar", True),
        ("u", "boolean", True),
    ]
    # only the numerics may not fit: the others need no per-value check, nor the whole event
    assert unfit_results(read_node(compiled.graph)) == (5, 6, 7)


@pytest.mark.postgres
def test_a_store_that_cannot_be_reached_is_not_described_and_its_password_is_not_shown(
    postgres_url: str, tmp_path: Path
) -> None:
    secret = "s3cr3t-Pa55"
    parts = urlsplit(postgres_url)
    url = urlunsplit(parts._replace(netloc=f"nobody:{secret}@{parts.hostname}:{parts.port}"))
    stores = resolve_bindings(DECLARED, {"crm": url}, {}, tmp_path)
    script = SCRIPT.replace("p.idplan + 1", "p.idplan").replace("p.fee * 2", "p.fee")
    [warning] = compile_script(script, describe=bindings_describer(stores)).warnings
    assert (
        "the result types of 'plan_of' were not read from data store crm: postgresql://nobody:***@"
        in warning.message
    )
    assert secret not in warning.message


def test_cep_run_local_compiles_with_the_bound_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cep run` compiles as `cep check` does: the described integer is an integer in the output."""
    sqlite_crm(tmp_path / "data", PLANS, "INSERT INTO plans VALUES (1, 10, 2.5), (2, 'abc', 1.0)")
    monkeypatch.setenv("CEP_DATA_DIR", str(tmp_path / "data"))
    script = tmp_path / "s.cpl"
    script.write_text(SCRIPT)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"k": 1, "idcaller": 1}\n{"k": 2, "idcaller": 2}\n')
    args = ["run", str(script), "--engine", "local", "--source", f"calls=file:{tmp_path / 'in'}"]
    args += ["--sink", f"nextplan=file:{tmp_path / 'out'}", "--dead-letter", f"file:{tmp_path / 'dead'}"]
    result = CliRunner().invoke(cli, [*args, "--until-idle"])
    assert result.exit_code == 0, result.output
    [out] = [json.loads(x) for f in (tmp_path / "out").iterdir() for x in f.read_text().splitlines()]
    assert out == {"k": 1, "plan": 11, "fee": 5.0}
    [dead] = [json.loads(x) for f in (tmp_path / "dead").iterdir() for x in f.read_text().splitlines()]
    assert dead["reason"] == "query plan_of, column 'idplan': 'abc' is not an integer"
