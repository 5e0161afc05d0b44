"""Ill-formed patterns are compile errors with line, column and caret (docs/language.md, "Patterns")."""

from __future__ import annotations

import pytest

from cpl.compiler import compile_script
from cpl.errors import CompileError

STREAMS = (
    "CREATE STREAMSCHEMA a WITH symbol varchar, price double, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA b WITH symbol varchar, price double, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA u WITH k integer;\n"
)

CASES = [
    ("FROM PATTERN e1=nope -> e2=b", "nope", "unknown stream 'nope'"),
    ("FROM PATTERN e1=u -> e2=b", "u ->", "stream 'u' has none"),
    ("FROM PATTERN e1=a[price > e9.price] -> e2=b", "e9.price", "unknown stream or alias 'e9'"),
    ("FROM PATTERN e1=a[price > e2.price] -> e2=b", "e2.price", "'e2' is bound by a later step"),
    ("FROM PATTERN e1=a -> e2=b+", "e2=b+", "'+' is for sequences"),
    ("FROM PATTERN e1=a -> e2=b WITHIN 0 SECONDS", "0 SECONDS", "a duration must be positive"),
    ("FROM PATTERN e1=a -> NOT b FOR 0 ms", "0 ms", "a duration must be positive"),
    ("FROM PATTERN e1=a -> e1=b", "e1=b", "alias 'e1' names two steps"),
    ("FROM PATTERN e1=a, e2=b", ",", "',' between the steps of a PATTERN"),
    ("FROM SEQUENCE e1=a -> e2=b", "->", "'->' between the steps of a SEQUENCE"),
    ("FROM PATTERN e1=a -> e2=b<3:1>", "e2=b<3:1>", "needs a maximum of at least 1"),
    ("FROM PATTERN e1=a -> NOT b", "NOT b", "NOT s[...] without FOR stands only beside a step"),
    ("FROM PATTERN EVERY (e1=a -> EVERY e2=b)", "EVERY e2=b", "EVERY inside EVERY"),
    ("FROM PATTERN e1=a -> e2=b PARTITION BY nope", "nope", "PARTITION BY nope"),
    ("FROM PATTERN e1=a -> e2=b[match_time() > ts]", "match_time()", "match_time() takes no arguments"),
    ("FROM PATTERN e1=a<3: -> e2=b", "->", "unexpected '->'"),
    ("FROM PATTERN e1 a -> e2=b", "a ->", "unexpected 'a'"),
]


@pytest.mark.parametrize(("pattern", "at", "message"), CASES, ids=[c[2][:30] for c in CASES])
def test_an_ill_formed_pattern_is_an_error_at_its_place(pattern: str, at: str, message: str) -> None:
    line = f"INSERT INTO o SELECT e1.price AS p {pattern};"
    with pytest.raises(CompileError) as info:
        compile_script(STREAMS + line, "t.cpl")
    text = info.value.render()
    assert message in text
    column = line.index(at) + 1
    assert f"t.cpl:4:{column}: error" in text, text


@pytest.mark.parametrize(
    ("select", "at", "message"),
    [
        ("e2.price AS p", "e2.price", "'e2' collects several events"),
        ("count(*) AS n", "count(*)", "Siddhi's running count() has no CPL form"),
        ("*", "*", "SELECT * is not allowed here"),
        ("price AS p", "price", "name the step 'price' comes from"),
        ("e1.nope AS p", "e1.nope", "'e1' has no field 'nope'"),
        ("e2[first].price AS p", "first", "expected a number, last or last - n"),
        ("e1.price AS p", "GROUP", "a pattern statement has no GROUP BY"),
    ],
)
def test_the_select_of_a_pattern_reads_its_steps(select: str, at: str, message: str) -> None:
    group = " GROUP BY e1.price" if "GROUP" in at else ""
    line = f"INSERT INTO o SELECT {select} FROM PATTERN e1=a -> e2=b<2:>{group};"
    with pytest.raises(CompileError) as info:
        compile_script(STREAMS + line, "t.cpl")
    text = info.value.render()
    assert message in text
    if at != "GROUP":
        assert f"t.cpl:4:{line.index(at) + 1}: error" in text, text


def test_a_pattern_that_can_grow_without_bound_compiles_with_a_warning() -> None:
    compiled = compile_script(STREAMS + "INSERT INTO o SELECT e1.price AS p FROM PATTERN EVERY e1=a -> e2=b;")
    assert any("without bound" in d.message for d in compiled.warnings)
    bounded = compile_script(
        STREAMS + "INSERT INTO o SELECT e1.price AS p FROM PATTERN EVERY e1=a -> e2=b WITHIN 1 MINUTE;"
    )
    assert not any("without bound" in d.message for d in bounded.warnings)


@pytest.mark.parametrize(
    "pattern",
    [
        "FROM SEQUENCE EVERY e1=a[price > 1]<0:2>",  # fuzzer seed 40101
        "FROM PATTERN e1=a<0:2> -> e2=b<:1>",
        "FROM SEQUENCE e1=a*, e2=b?",
        "FROM PATTERN EVERY (e1=a<:3> -> e2=b<0:>) WITHIN 1 SECOND",
    ],
)
def test_a_pattern_that_can_match_no_event_is_an_error(pattern: str) -> None:
    """It would match at its first event, whatever it is; a partial kept from one event to the next
    and one started anew would disagree on the next (the reference executor forgot the key after
    each event, Spark after each micro-batch: 6 matches against 1)."""
    line = f"INSERT INTO o SELECT count(e1.price) AS n {pattern};"
    with pytest.raises(CompileError) as info:
        compile_script(STREAMS + line, "t.cpl")
    text = info.value.render()
    assert "every element of this pattern can match no event" in text
    assert f"t.cpl:4:{line.index('FROM ') + 6}: error" in text, text  # at PATTERN / SEQUENCE


def test_a_pattern_with_one_step_that_takes_an_event_compiles() -> None:
    for pattern in (
        "FROM PATTERN EVERY e1=a<0:2> -> e2=b",
        "FROM SEQUENCE e1=a*, e2=b+",
        "FROM PATTERN NOT a FOR 1 sec",
    ):
        line = f"INSERT INTO o SELECT match_time() AS t {pattern};"
        assert compile_script(STREAMS + line).graph is not None
