"""An ill-formed OUTPUT clause is a compile error with line, column and caret (docs/language.md,
"Output rate limiting"); a well-formed one keeps its place in the plan and in `cep explain`."""

from __future__ import annotations

import pytest

from cpl.compiler import compile_script
from cpl.errors import CompileError, Diagnostics
from cpl.parser import parse
from cpl.unparse import script as unparse_script
from operators.explain import to_text

STREAMS = (
    "CREATE STREAMSCHEMA s WITH ip varchar, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA u WITH ip varchar, v integer;\n"
)

CASES = [
    ("SELECT ip FROM s OUTPUT EVERY 0 EVENTS", "0 EVENTS", "the count must be at least 1"),
    ("SELECT ip FROM s OUTPUT LAST EVERY 0 SECONDS", "0 SECONDS", "a duration must be positive"),
    ("SELECT ip FROM s OUTPUT EVERY -5 SECONDS", "-5 SECONDS", "must be positive"),
    ("SELECT ip FROM s OUTPUT EVERY 5 FORTNIGHTS", "5 FORTNIGHTS", "unknown time unit 'fortnights'"),
    (
        "SELECT ip FROM s OUTPUT SNAPSHOT EVERY 1 SECOND",
        "OUTPUT SNAPSHOT",
        "OUTPUT SNAPSHOT needs a windowed aggregate",
    ),
    (
        "SELECT e1.v AS v FROM PATTERN e1=s -> e2=s OUTPUT SNAPSHOT EVERY 1 SECOND",
        "OUTPUT SNAPSHOT",
        "OUTPUT SNAPSHOT needs a windowed aggregate",
    ),
    (
        "SELECT ip, count(*) AS n FROM s WINDOW TUPLE SIZE 5 GROUP BY ip OUTPUT FIRST SNAPSHOT EVERY 1 SECOND",
        "FIRST SNAPSHOT",
        "SNAPSHOT takes no FIRST or LAST",
    ),
    (
        "SELECT ip, count(*) AS n FROM s WINDOW TUPLE SIZE 5 GROUP BY ip OUTPUT SNAPSHOT LAST EVERY 1 SECOND",
        "SNAPSHOT LAST",
        "SNAPSHOT takes no FIRST or LAST",
    ),
    (
        "SELECT count(*) AS n FROM s WINDOW TUPLE SIZE 5 OUTPUT SNAPSHOT EVERY 5 EVENTS",
        "5 EVENTS",
        "OUTPUT SNAPSHOT ticks on time",
    ),
    (
        "SELECT ip FROM u OUTPUT EVERY 1 SECOND",
        "OUTPUT EVERY",
        "ticks on event time, and stream 'u' has none",
    ),
    ("SELECT ip FROM s GROUP BY ip", "ip;", "GROUP BY needs a window"),
    (
        "SELECT s.ip AS ip FROM s WINDOW TIME SIZE 1 SECOND, s AS t WINDOW TIME SIZE 1 SECOND "
        "WHERE s.ip = t.ip OUTPUT EVERY 1 SECOND",
        "OUTPUT EVERY",
        "select the left stream's event-time field",
    ),
    ("SELECT ip FROM s GROUP BY ip HAVING v > 1 OUTPUT EVERY 2 EVENTS", "ip HAVING", "need a window"),
    ("SELECT ip FROM s OUTPUT EVERY 2", ";", "statement ends too early"),
]


@pytest.mark.parametrize(("statement", "at", "message"), CASES, ids=[c[2][:40] for c in CASES])
def test_an_ill_formed_output_clause_is_an_error_at_its_place(statement: str, at: str, message: str) -> None:
    line = f"INSERT INTO o {statement};"
    with pytest.raises(CompileError) as info:
        compile_script(STREAMS + line, "t.cpl")
    text = info.value.render()
    assert message in text, text
    assert f"t.cpl:3:{line.index(at) + 1}: error" in text, text
    assert "^" in text  # the caret under the offending text


def test_output_and_its_kinds_stay_usable_as_field_names_where_they_are_not_keywords_in_place() -> None:
    streams = "CREATE STREAMSCHEMA s WITH first integer, last integer, events integer, snapshot integer;\n"
    graph = compile_script(streams + "INSERT INTO o SELECT first, last, events, snapshot FROM s;").graph
    assert [f.name for f in graph.stream_schema("o")] == ["first", "last", "events", "snapshot"]


@pytest.mark.parametrize(
    "clause",
    [
        "OUTPUT EVERY 5 EVENTS",
        "OUTPUT FIRST EVERY 1 MINUTE",
        "OUTPUT LAST EVERY 10 SECONDS",
        "OUTPUT ALL EVERY 2 EVENTS",
    ],
)
def test_the_clause_survives_unparsing(clause: str) -> None:
    text = f"INSERT INTO o SELECT ip FROM s GROUP BY ip {clause};"
    first = parse(text, Diagnostics())
    again = parse(unparse_script(first), Diagnostics())
    assert first == again and first.statements[0].select.output is not None  # type: ignore[union-attr]


def _explain(statement: str) -> str:
    return to_text(compile_script(STREAMS + statement).graph)


def test_explain_shows_the_limiter_with_its_kind_period_and_groups() -> None:
    text = _explain(
        "INSERT INTO o SELECT sum(v) AS total FROM s WINDOW TIME SIZE 1 MINUTE GROUP BY ip "
        "OUTPUT LAST EVERY 10 SECONDS;"
    )
    block = text[text.index("= OutputRate(") :].split("\n")
    assert "    output: LAST EVERY 10 SECONDS" in block
    assert "    per_group: [ip]" in block
    assert "    schema: (total bigint)" in block  # the key column the limiter reads does not go on
    assert "    out: o" in block


def test_explain_of_a_count_limit_without_groups_says_all_by_default() -> None:
    text = _explain("INSERT INTO o SELECT ip FROM s OUTPUT EVERY 3 EVENTS;")
    assert "output: ALL EVERY 3 EVENTS" in text
    assert "per_group" not in text
