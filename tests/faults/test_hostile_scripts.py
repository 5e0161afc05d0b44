"""Hostile scripts are refused by `cep run` at compile time, with the line and column of the problem,
before Spark starts or any store is touched: deep nesting, huge literals, functions that would reach
the JVM through Spark SQL (`reflect`, `java_method`, ...), and SQL texts that smuggle in a second
statement, plainly or hidden from a naive reader in PostgreSQL's dollar quotes and E'' strings.

Each script is run through the real CLI with a file source, a file sink, a dead-letter directory, a
checkpoint and a real PostgreSQL store that holds a `victim` table; afterwards the victim still
has its rows, nothing was written anywhere, and the run took no longer than a compile. For the SQL
texts, the test first shows they are really hostile: sent as they are to another database, they
drop its `victim` table.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
from fault_helpers import CEP, run_env

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

HEAD = """CREATE STREAMSCHEMA calls WITH id integer, caller integer, name varchar(20), ts timestamp;
CREATE DATASTORE crm TYPE postgresql;
"""
LINE = 3  # the line of the statement after HEAD
EXPR_COL = 28  # where the expression starts in "INSERT INTO out SELECT id, <expr> AS y FROM calls;"
SQL_COL = 29  # where the SQL text starts in "CREATE SQLQUERY q ON crm AS '<text>'"

EXPRESSIONS = {
    "deep parentheses": ("(" * 5000 + "id" + " + 1)" * 5000, "expression is nested too deeply"),
    "a long operator chain": (" + ".join(["id"] * 500), "expression is nested more than 100 levels deep"),
    "a huge string literal": ("'" + "x" * 100_000 + "'", "string literal is longer than 65536 characters"),
    "reflect": ("reflect('java.lang.Runtime', 'getRuntime')", "unknown function 'reflect'"),
    "java_method": ("java_method('java.lang.Runtime', 'getRuntime')", "unknown function 'java_method'"),
    "try_reflect": ("try_reflect('java.lang.System', 'exit', 1)", "unknown function 'try_reflect'"),
    "raise_error": ("raise_error('boom')", "unknown function 'raise_error'"),
}

# SQL texts with a second statement; `?` is the event's caller. The hidden ones pass a reader that
# only knows standard quotes: it takes the `'` inside $$...$$ or E'\'' for the start of a string
# that runs to the end, and so misses the `;`.
SQL = {
    "plain": "SELECT fee FROM plans WHERE caller = ?; DROP TABLE victim",
    "in a dollar quote": "SELECT fee FROM plans WHERE caller = ? AND $$'$$ <> ''; DROP TABLE victim; --'",
    "in a tagged dollar quote": "SELECT fee FROM plans WHERE caller = ? AND $q$'$q$ <> ''; DROP TABLE victim; --'",
    "after an E string": "SELECT fee FROM plans WHERE caller = ? AND E'\\'' = ''; DROP TABLE victim; --'",
    "an update": "UPDATE plans SET fee = fee WHERE caller = ? AND $$'$$ <> ''; DROP TABLE victim; --'",
}


def cpl_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def expression_script(expr: str) -> str:
    return HEAD + f"INSERT INTO out SELECT id, {expr} AS y FROM calls;\n"


def sql_script(sql: str) -> str:
    returns = " RETURNS (fee integer)" if sql.startswith("SELECT") else ""
    column = "fee" if returns else "n"
    return HEAD + (
        f"CREATE SQLQUERY q ON crm AS {cpl_string(sql)}{returns};\n"
        f"INSERT INTO out SELECT id, p.{column} AS y FROM calls ON SQL q, p, caller, {column};\n"
    )


def prepare(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE victim (id integer PRIMARY KEY, note text)")
        conn.execute("INSERT INTO victim VALUES (1, 'keep me'), (2, 'me too')")
        conn.execute("CREATE TABLE plans (caller integer PRIMARY KEY, fee integer)")
        conn.execute("INSERT INTO plans VALUES (1, 3), (2, 5)")


def victim(url: str) -> list[tuple[int, str]] | None:
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('victim')").fetchone() == (None,):
            return None
        return [(int(i), str(n)) for i, n in conn.execute("SELECT id, note FROM victim ORDER BY id")]


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {
            str(r[0]) for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }


def cep_run(
    tmp_path: Path, name: str, script: str, store: str
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    run = tmp_path / re.sub(r"\W+", "-", name)
    (run / "in").mkdir(parents=True)
    events = [
        {"id": i, "caller": 1 + i % 2, "name": "ann", "ts": f"2026-01-01T00:00:0{i}Z"} for i in range(3)
    ]
    (run / "in" / "calls-0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    path = run / "hostile.cpl"
    path.write_text(script, encoding="utf-8")
    args = [
        str(CEP),
        "run",
        str(path),
        "--source",
        f"calls=file:{run / 'in'}",
        "--sink",
        f"out=file:{run / 'out'}",
        "--dead-letter",
        f"file:{run / 'dead'}",
        "--store",
        f"crm={store}",
        "--checkpoint",
        str(run / "ck"),
        "--until-idle",
        "--master",
        "local[2]",
    ]
    done = subprocess.run(
        args, env=run_env(run), cwd=run, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )
    return done, run, path


def assert_refused(
    done: subprocess.CompletedProcess[str], run: Path, path: Path, message: str, col: int | None, took: float
) -> None:
    """Refused with `message` at line LINE and column `col` (None: a column inside that line) of
    the script, without starting anything."""
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    found = re.search(rf"^{re.escape(str(path))}:(\d+):(\d+): error: (.*)$", output, re.MULTILINE)
    assert found is not None, output[-3000:]
    assert found[3] == message or found[3].startswith(message), output[-3000:]
    width = len(path.read_text().splitlines()[LINE - 1])
    assert (int(found[1]), int(found[2])) == (LINE, col or min(max(int(found[2]), EXPR_COL), width))
    assert "Traceback" not in output and "spark UI" not in output and "data store crm" not in output
    left = sorted(p.name for p in run.iterdir())
    assert left == ["hostile.cpl", "in"], left  # no sink, dead letter, checkpoint or data dir
    assert took < 30, f"refused after {took:.0f} s: Spark must not start for a script that does not compile"


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_hostile_expressions_are_refused_before_anything_runs(name: str, pg_db: str, tmp_path: Path) -> None:
    prepare(pg_db)
    expr, message = EXPRESSIONS[name]
    t0 = time.monotonic()
    done, run, path = cep_run(tmp_path, name, expression_script(expr), pg_db)
    col = None if name == "deep parentheses" else EXPR_COL  # that one: where the depth runs out
    assert_refused(done, run, path, message, col, time.monotonic() - t0)
    assert victim(pg_db) == [(1, "keep me"), (2, "me too")]
    assert tables(pg_db) == {"victim", "plans"}  # no ledger, no table: the store was not touched


@pytest.mark.parametrize("name", list(SQL))
def test_sql_with_a_second_statement_is_refused_and_never_executed(
    name: str, pg_db: str, pg_reference_db: str, tmp_path: Path
) -> None:
    sql = SQL[name]
    # The text is really hostile: PostgreSQL, sent it whole (simple protocol), drops the table.
    prepare(pg_reference_db)
    with psycopg.connect(pg_reference_db, autocommit=True) as conn:
        conn.execute(sql.replace("?", "1").encode())  # bytes: psycopg must not read `%` or `?` in it
    assert victim(pg_reference_db) is None

    prepare(pg_db)
    t0 = time.monotonic()
    script = sql_script(sql)
    done, run, path = cep_run(tmp_path, name, script, pg_db)
    message = "the SQL text holds more than one statement; a SQLQUERY runs exactly one"
    assert_refused(done, run, path, message, SQL_COL, time.monotonic() - t0)
    assert victim(pg_db) == [(1, "keep me"), (2, "me too")]
    assert tables(pg_db) == {"victim", "plans"}
