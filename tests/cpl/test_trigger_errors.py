"""CREATE TRIGGER: an ill-formed one is a compile error with line, column and caret (docs/language.md,
"Triggers"); a well-formed one is a source stream of `triggered_time`, shown by `cep explain`."""

from __future__ import annotations

import pytest

from cpl.compiler import compile_script
from cpl.errors import CompileError, Diagnostics
from cpl.parser import parse
from cpl.unparse import script as unparse_script
from operators import graph as g
from operators.explain import to_text

STREAM = "CREATE STREAMSCHEMA s WITH ip varchar, ts timestamp TIMESTAMP BY ts;\n"

CASES = [
    ("CREATE TRIGGER t AT EVERY 0 SECONDS;", "0 SECONDS", "AT EVERY 0 SECONDS: the period must be positive"),
    ("CREATE TRIGGER t AT EVERY -5 MINUTES;", "-5 MINUTES", "the period must be positive"),
    ("CREATE TRIGGER t AT EVERY 5 FORTNIGHTS;", "5 FORTNIGHTS", "unknown time unit 'fortnights'"),
    ("CREATE TRIGGER t AT EVERY 5 EVENTS;", "5 EVENTS", "unknown time unit 'events'"),
    ("CREATE TRIGGER t AT '*/5 * * * *';", "'*/5", "has 6 or 7 fields"),
    ("CREATE TRIGGER t AT '0 0 12 ? * 9';", "'0 0", "day of week 9 is out of range"),
    ("CREATE TRIGGER t AT '61 * * * * ?';", "'61", "a field is out of range"),
    ("CREATE TRIGGER t AT '0 0 12 ? * 6L';", "'0 0", "a weekday with L"),
    ("CREATE TRIGGER t AT '0 0 0 30 2 ?';", "'0 0 0 30", "it never fires"),
    ("CREATE TRIGGER s AT START;", "s AT", "stream 's' is already declared at line 1"),
    ("CREATE TRIGGER t AT;", ";", "expected one of EVERY, START, a string"),
    ("CREATE TRIGGER t AT EVERY 5 SECONDS AT START;", "AT START", "unexpected 'AT'"),
]


@pytest.mark.parametrize(("statement", "at", "message"), CASES, ids=[c[2][:40] for c in CASES])
def test_an_ill_formed_trigger_is_an_error_at_its_place(statement: str, at: str, message: str) -> None:
    with pytest.raises(CompileError) as info:
        compile_script(STREAM + statement, "t.cpl")
    text = info.value.render()
    assert message in text, text
    assert f"t.cpl:2:{statement.index(at) + 1}: error" in text, text
    assert "^" in text


def test_a_stream_may_not_reuse_a_triggers_name() -> None:
    with pytest.raises(CompileError) as info:
        compile_script("CREATE TRIGGER t AT START;\nINSERT INTO t SELECT ip FROM s2;", "t.cpl")
    assert "t.cpl:2:" in info.value.render()


def test_a_trigger_is_a_source_of_its_ticks_with_event_time() -> None:
    graph = compile_script(
        "CREATE TRIGGER every5 AT EVERY 5 MINUTES;\n"
        "INSERT INTO o SELECT max(triggered_time) AS at, count(*) AS n FROM every5 WINDOW TIME SIZE 1 HOUR;"
    ).graph
    (src,) = graph.sources()
    assert src.trigger is not None and src.trigger.every_ms == 300_000
    assert src.event_time == "triggered_time" and src.watermark_ms == 0
    assert [(f.name, f.type.kind) for f in src.schema] == [("triggered_time", "timestamp")]


@pytest.mark.parametrize(
    ("declaration", "shown"),
    [
        ("AT EVERY 90 SECONDS", "trigger: AT EVERY 90 SECONDS"),
        ("AT START", "trigger: AT START"),
        ("AT '0  */5 * * * ?'", "trigger: AT '0 */5 * * * ?'"),
    ],
)
def test_explain_shows_when_a_trigger_ticks(declaration: str, shown: str) -> None:
    text = to_text(compile_script(f"CREATE TRIGGER t {declaration};\nINSERT INTO o SELECT * FROM t;").graph)
    assert f"    {shown}" in text.split("\n"), text


@pytest.mark.parametrize("declaration", ["AT EVERY 5 MINUTES", "AT START", "AT '0 0 12 ? * MON-FRI'"])
def test_a_trigger_survives_unparsing(declaration: str) -> None:
    first = parse(f"CREATE TRIGGER t {declaration};", Diagnostics())
    again = parse(unparse_script(first), Diagnostics())
    assert first == again


def test_trigger_and_at_stay_usable_as_names() -> None:
    graph = compile_script(
        "CREATE STREAMSCHEMA s WITH trigger integer, at integer;\nINSERT INTO o SELECT at, trigger FROM s;"
    ).graph
    assert [f.name for f in graph.stream_schema("o")] == ["at", "trigger"]
    assert isinstance(graph.sources()[0], g.Source) and graph.sources()[0].trigger is None
