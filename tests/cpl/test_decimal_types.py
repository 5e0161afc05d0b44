"""The types of decimal expressions and aggregates, as the compiler gives them (no JVM): the rules of
docs/language.md, "Decimals" (operators.decimals), which Spark computes in the same types."""

from __future__ import annotations

import textwrap

import pytest

from cpl.compiler import compile_script
from cpl.errors import CompileError
from operators import graph as g

HEAD = """
CREATE STREAMSCHEMA d WITH a decimal(10, 2), b decimal(6, 3), w decimal(38, 10), z decimal(38, 0),
  f decimal(38, 36), n integer, m bigint, x double, ts timestamp TIMESTAMP BY ts;
"""


def types(select: str, window: str = "") -> dict[str, str]:
    """The output types of `INSERT INTO o SELECT <select> FROM d [window]`."""
    script = HEAD + f"INSERT INTO o SELECT {select} FROM d {window};"
    graph = compile_script(textwrap.dedent(script)).graph
    return {f.name: str(f.type) for f in graph.stream_schema("o")}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # + and -: the wider integer part and the wider scale, one digit more
        ("a + b", "decimal(12, 3)"),
        ("a - b", "decimal(12, 3)"),
        # *: precisions and scales add up, one digit more
        ("a * b", "decimal(17, 5)"),
        # /: at least 6 places, s1 + p2 + 1
        ("a / b", "decimal(20, 9)"),
        ("b / a", "decimal(19, 14)"),
        # %: the narrower integer part, the wider scale
        ("a % b", "decimal(6, 3)"),
        ("mod(a, b)", "decimal(6, 3)"),
        # an integer is decimal(10, 0), a bigint decimal(20, 0), a literal as many digits as it has
        ("a * n", "decimal(21, 2)"),
        ("a + m", "decimal(23, 2)"),
        ("a * 100", "decimal(14, 2)"),
        ("a / 3", "decimal(14, 6)"),
        ("n % a", "decimal(10, 2)"),
        # beyond 38 digits: the integer digits first, but at least 6 places (or all of them, fewer)
        ("w * w", "decimal(38, 6)"),
        ("z + z", "decimal(38, 0)"),
        ("w / b", "decimal(38, 7)"),
        ("f * f", "decimal(38, 33)"),
        ("z * f", "decimal(38, 6)"),
        # a double makes it a double; unary minus and abs keep the type
        ("a * x", "double"),
        ("-a", "decimal(10, 2)"),
        ("abs(f)", "decimal(38, 36)"),
        # round: d places, and room for the carry; floor and ceil: the integer part, one digit more
        ("round(a, 1)", "decimal(10, 1)"),
        ("round(a)", "decimal(9, 0)"),
        ("round(a, 5)", "decimal(11, 2)"),
        ("round(a, -2)", "decimal(9, 0)"),
        ("round(z, -1)", "decimal(38, 0)"),
        ("floor(a)", "decimal(9, 0)"),
        ("ceil(b)", "decimal(4, 0)"),
        ("floor(z)", "decimal(38, 0)"),
        ("floor(x)", "bigint"),
        # one value of several: the integer digits of all and the most places, within 38 digits
        ("CASE WHEN n > 0 THEN a ELSE b END", "decimal(11, 3)"),
        ("coalesce(a, 0)", "decimal(10, 2)"),
        ("coalesce(a, n)", "decimal(12, 2)"),
        ("greatest(a, b, 7)", "decimal(11, 3)"),
        ("coalesce(z, f)", "decimal(38, 0)"),
        ("coalesce(w, f)", "decimal(38, 10)"),
        ("least(a, x)", "double"),
        # CAST gives the type asked for
        ("CAST(x AS decimal(12, 4))", "decimal(12, 4)"),
    ],
)
def test_expression_types(expr: str, expected: str) -> None:
    assert types(f"{expr} AS v")["v"] == expected


@pytest.mark.parametrize(
    ("agg", "expected"),
    [
        ("sum(a)", "decimal(20, 2)"),  # ten more integer digits
        ("sum(w)", "decimal(38, 10)"),
        ("avg(a)", "decimal(14, 6)"),  # four more digits, four more places
        ("avg(f)", "decimal(38, 38)"),
        ("min(a)", "decimal(10, 2)"),
        ("max(f)", "decimal(38, 36)"),
        ("sum(n)", "bigint"),
        ("sum(m)", "bigint"),
        ("avg(m)", "double"),
        ("count(a)", "bigint"),
    ],
)
def test_aggregate_types(agg: str, expected: str) -> None:
    got = types(f"{agg} AS v", "WINDOW TUPLE SIZE 2")
    assert got["v"] == expected


def test_a_remainder_whose_quotient_may_pass_38_digits_is_refused() -> None:
    with pytest.raises(
        CompileError, match=r"decimal\(38, 0\) % decimal\(38, 36\) cannot be computed exactly"
    ):
        types("z % f AS v")
    with pytest.raises(CompileError, match="quotient may need more than 38 digits"):
        types("mod(m, f) AS v")


def test_a_union_needs_the_same_decimal_types() -> None:
    script = """
    CREATE STREAMSCHEMA p WITH v decimal(10, 2);
    CREATE STREAMSCHEMA q WITH v decimal(12, 4);
    INSERT INTO o SELECT * FROM p, q;
    """
    with pytest.raises(CompileError, match="Union needs identical schemas"):
        compile_script(textwrap.dedent(script))


def test_a_cast_of_a_literal_is_folded_only_when_it_fits() -> None:
    script = (
        HEAD
        + "INSERT INTO o SELECT CAST('1.005' AS decimal(4, 2)) AS ok, CAST('123' AS decimal(3, 1)) AS big FROM d;"
    )
    graph = compile_script(textwrap.dedent(script)).graph
    (m,) = [n for n in graph.nodes if isinstance(n, g.Map)]
    ok, big = (p.expr for p in m.projections)
    assert ok.to_cpl() == "CAST('1.01' AS decimal(4, 2))"  # rounded half up
    assert big.to_cpl() == "CAST('123' AS decimal(3, 1))"  # left to fail for the events that reach it
