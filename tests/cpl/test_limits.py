"""Hostile scripts are refused with a diagnostic, never by exhausting the compiler."""

from __future__ import annotations

import pytest

from cpl.compiler import compile_script
from cpl.errors import CompileError

HEAD = "CREATE STREAMSCHEMA s WITH a integer, b varchar(10);\n"


def _errors(text: str) -> list[str]:
    with pytest.raises(CompileError) as info:
        compile_script(text)
    return [d.message for d in info.value.errors]


def test_deep_parentheses_are_refused() -> None:
    expr = "(" * 5000 + "a" + " + 1)" * 5000  # (((a + 1) + 1) ...)
    msgs = _errors(HEAD + f"INSERT INTO x SELECT {expr} AS y FROM s;")
    assert any("nested too deeply" in m for m in msgs)


def test_long_operator_chains_are_refused() -> None:
    expr = " + ".join(["a"] * 500)
    msgs = _errors(HEAD + f"INSERT INTO x SELECT {expr} AS y FROM s;")
    assert any("nested more than 100 levels" in m for m in msgs)


def test_huge_string_literal_is_refused() -> None:
    msgs = _errors(HEAD + "INSERT INTO x SELECT a FROM s WHERE b = '" + "x" * 100_000 + "';")
    assert any("longer than 65536 characters" in m for m in msgs)


def test_oversized_script_is_refused() -> None:
    msgs = _errors(HEAD + "-- " + "x" * 2_100_000 + "\n")
    assert msgs == ["script is larger than 2000000 characters"]


@pytest.mark.parametrize("fn", ["reflect", "java_method", "eval", "exec", "system"])
def test_engine_functions_are_unknown(fn: str) -> None:
    msgs = _errors(HEAD + f"INSERT INTO x SELECT {fn}('java.lang.Runtime', 'exec', 'id') AS y FROM s;")
    assert msgs == [f"unknown function '{fn}'"]


def test_several_sql_statements_are_refused() -> None:
    msgs = _errors(
        HEAD
        + "CREATE DATASTORE crm TYPE postgresql;\n"
        + "CREATE SQLQUERY q ON crm AS 'SELECT 1 WHERE ? = 1; DELETE FROM plans';\n"
    )
    assert msgs[0] == "the SQL text holds more than one statement; a SQLQUERY runs exactly one"


def test_a_script_with_only_declarations_has_nothing_to_run() -> None:
    assert _errors(HEAD) == ["the script has no INSERT INTO ... SELECT statement: there is nothing to run"]
