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


def test_a_count_window_per_group_is_warned_about() -> None:
    """Scenario 14 of the fault suite: state that nothing expires is pointed out at compile time. A
    TUPLE or BATCH window per group keeps every group's open window; TIME windows and joins are
    bounded by the watermark, and a count window over the whole stream keeps one window."""
    head = "CREATE STREAMSCHEMA s WITH a integer, k integer, ts timestamp TIMESTAMP BY ts;\n"
    per_group = compile_script(
        head + "INSERT INTO o SELECT k, sum(a) AS t FROM s WINDOW TUPLE SIZE 3 GROUP BY k;"
    )
    [w] = per_group.warnings
    assert (
        w.pos.line == 2
        and "TUPLE window" in w.message
        and "grows with the number of distinct groups" in w.message
    )
    batch = compile_script(
        head + "INSERT INTO o SELECT k, count(*) AS n FROM s WINDOW BATCH START a > 1 STOP a < 0 GROUP BY k;"
    )
    assert [w.pos.line for w in batch.warnings] == [2]
    for bounded in (
        "INSERT INTO o SELECT sum(a) AS t FROM s WINDOW TUPLE SIZE 3;",
        "INSERT INTO o SELECT k, sum(a) AS t FROM s WINDOW TIME SIZE 1 MINUTE GROUP BY k;",
    ):
        assert compile_script(head + bounded).warnings == []
