"""Expression semantics of the reference executor (deployer.evaluation.evaluate): SQL NULLs, errors, LIKE, CAST."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from cpl.compiler import compile_script
from deployer.evaluation.evaluate import EvalError, compile_expr, like_regex
from operators.graph import Map

FIELDS = "a integer, b integer, x double, d decimal(10, 2), s varchar, p boolean, q boolean, t timestamp"
NAMES = ("a", "b", "x", "d", "s", "p", "q", "t")


def ev(expr: str, **values: Any) -> Any:
    """Evaluate `expr` on one event whose fields default to NULL."""
    graph = compile_script(
        f"CREATE STREAMSCHEMA e WITH {FIELDS}; INSERT INTO o SELECT {expr} AS v FROM e;"
    ).graph
    node = next(n for n in graph.nodes if isinstance(n, Map))
    row = tuple(values.get(n) for n in NAMES)
    return compile_expr(node.projections[0].expr)(row)


# ---- three-valued logic ----------------------------------------------------------------------------

T, F, N = True, False, None
AND = [(T, T, T), (T, F, F), (T, N, N), (F, N, F), (N, F, F), (N, N, N), (F, F, F)]
OR = [(T, T, T), (T, F, T), (T, N, T), (F, N, N), (N, T, T), (N, N, N), (F, F, F)]


@pytest.mark.parametrize(("p", "q", "out"), AND)
def test_and(p: Any, q: Any, out: Any) -> None:
    assert ev("p AND q", p=p, q=q) is out


@pytest.mark.parametrize(("p", "q", "out"), OR)
def test_or(p: Any, q: Any, out: Any) -> None:
    assert ev("p OR q", p=p, q=q) is out


def test_not_and_is_null() -> None:
    assert ev("NOT p", p=None) is None
    assert ev("NOT p", p=False) is True
    assert ev("a IS NULL") is True
    assert ev("a IS NOT NULL", a=0) is True


def test_null_operands_give_null() -> None:
    assert ev("a + 1") is None
    assert ev("a = b", a=1) is None
    assert ev("s || 'x'") is None
    assert ev("-a") is None


# ---- arithmetic --------------------------------------------------------------------------------------


def test_division_and_modulo() -> None:
    assert ev("a / b", a=7, b=2) == 3.5
    assert ev("d / 4", d=Decimal("1.00")) == Decimal("0.250000")
    assert ev("a % b", a=-7, b=2) == -1  # sign of the dividend
    assert ev("a % b", a=7, b=-2) == 1
    assert ev("mod(a, b)", a=-7, b=3) == -1
    assert ev("x % 2", x=-7.5) == -1.5


@pytest.mark.parametrize("expr", ["a / b", "a % b", "x / b", "d / b", "mod(a, b)"])
def test_division_by_zero_is_an_error(expr: str) -> None:
    with pytest.raises(EvalError, match="division by zero"):
        ev(expr, a=1, b=0, x=1.0, d=Decimal(1))


def test_integer_overflow_is_an_error() -> None:
    with pytest.raises(EvalError, match="overflow"):
        ev("a * 2", a=2**31 - 1)
    assert ev("CAST(a AS bigint) * 2", a=2**31 - 1) == 2**32 - 2


def test_mixed_numeric_types_widen() -> None:
    assert ev("a + x", a=1, x=0.5) == 1.5
    assert ev("d + a", d=Decimal("1.25"), a=1) == Decimal("2.25")
    assert ev("d * x", d=Decimal("0.1"), x=3.0) == pytest.approx(0.3)
    assert ev("d = x", d=Decimal("0.10"), x=0.1) is True  # compared as doubles


# ---- predicates ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text", "out"),
    [
        ("a%", "abc", True),
        ("a_c", "abc", True),
        ("a_c", "abbc", False),
        ("%.%", "a.b", True),
        ("%.%", "ab", False),  # '.' is not a regex wildcard
        ("(x)*", "(x)*", True),
        ("(x)*", "xx", False),
        ("100\\%", "100%", True),  # backslash escapes % and _
        ("100\\%", "1000", False),
        ("%", "", True),
        ("A%", "abc", False),  # case-sensitive
        ("a%", "a\nb", True),
    ],
)
def test_like(pattern: str, text: str, out: bool) -> None:
    assert (like_regex(pattern).fullmatch(text) is not None) is out
    assert ev(f"s LIKE '{pattern}'", s=text) is out
    assert ev(f"s NOT LIKE '{pattern}'", s=text) is (not out)


def test_like_with_null() -> None:
    assert ev("s LIKE 'a%'") is None


def test_in_with_nulls() -> None:
    assert ev("a IN (1, 2)", a=2) is True
    assert ev("a IN (1, 2)", a=3) is False
    assert ev("a IN (1, b)", a=3) is None  # 3 = NULL is unknown
    assert ev("a IN (1, b)", a=1) is True
    assert ev("a IN (1, 2)") is None
    assert ev("a NOT IN (1, b)", a=3) is None
    assert ev("a NOT IN (1, 2)", a=3) is True


def test_between() -> None:
    assert ev("a BETWEEN 1 AND 3", a=3) is True
    assert ev("a BETWEEN 1 AND 3", a=4) is False
    assert ev("a NOT BETWEEN 1 AND 3", a=4) is True
    assert ev("a BETWEEN b AND 3", a=4) is False  # NULL <= 4 unknown, 4 <= 3 false: false
    assert ev("a BETWEEN b AND 3", a=2) is None


def test_case() -> None:
    expr = "CASE WHEN a > 10 THEN 'big' WHEN a > 0 THEN 'small' ELSE 'none' END"
    assert [ev(expr, a=v) for v in (11, 5, -1, None)] == ["big", "small", "none", "none"]
    assert ev("CASE WHEN a > 0 THEN 1 END", a=-1) is None
    assert ev("CASE a WHEN 1 THEN 'one' ELSE 'other' END", a=1) == "one"
    assert ev("CASE WHEN p THEN 1 ELSE 2.5 END", p=True) == 1.0  # widened to double
    assert isinstance(ev("CASE WHEN p THEN 1 ELSE 2.5 END", p=True), float)


# ---- CAST ------------------------------------------------------------------------------------------------


def test_cast_conversions() -> None:
    assert ev("CAST(s AS integer)", s=" 42 ") == 42
    assert ev("CAST(s AS double)", s="2.5") == 2.5
    assert ev("CAST(s AS decimal(6, 2))", s="3.14159") == Decimal("3.14")
    assert ev("CAST(x AS integer)", x=-2.7) == -2  # toward zero
    assert ev("CAST(a AS varchar)", a=7) == "7"
    assert ev("CAST(p AS varchar)", p=True) == "true"
    assert ev("CAST(s AS boolean)", s="yes") is True
    assert ev("CAST(s AS timestamp)", s="2026-01-31T12:00:00Z") == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert ev("CAST(s AS timestamp)", s="2026-01-31 12:00:00") == datetime(2026, 1, 31, 12, tzinfo=UTC)
    t = datetime(2026, 1, 31, 12, 0, 0, 500000, tzinfo=UTC)
    assert ev("CAST(t AS varchar)", t=t) == "2026-01-31 12:00:00.5"
    assert ev("CAST(s AS varchar(3))", s="abcdef") == "abc"
    assert ev("CAST(s AS integer)") is None


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("CAST(s AS integer)", "cannot cast 'abc' to integer"),
        ("CAST(s AS double)", "cannot cast 'abc' to double"),
        ("CAST(s AS decimal(4, 1))", "cannot cast 'abc' to decimal(4, 1)"),
        ("CAST(s AS timestamp)", "cannot cast 'abc' to timestamp"),
        ("CAST(s AS boolean)", "cannot cast 'abc' to boolean"),
    ],
)
def test_cast_errors(expr: str, message: str) -> None:
    with pytest.raises(EvalError) as err:
        ev(expr, s="abc")
    assert str(err.value) == message


def test_cast_error_quotes_text_as_a_literal() -> None:
    # A quote doubled, a newline kept: the form Spark's reasons build too (no Python escapes).
    with pytest.raises(EvalError) as err:
        ev("CAST(s AS double)", s="x'y\nz\\")
    assert str(err.value) == "cannot cast 'x''y\nz\\' to double"


def test_cast_out_of_range() -> None:
    with pytest.raises(EvalError, match="out of range"):
        ev("CAST(s AS decimal(4, 2))", s="123.4")
    with pytest.raises(EvalError, match="out of range"):
        ev("CAST(s AS integer)", s="3000000000")


def test_cast_error_dead_letters_in_a_run(run) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH raw varchar;
    INSERT INTO o SELECT CAST(raw AS integer) AS n FROM s;
    """
    ex = run(script, [("s", ("1",)), ("s", ("abc",)), ("s", ("3",))])
    assert ex.outputs["o"] == [(1,), (3,)]
    assert [d.reason for d in ex.dead_letters] == ["cannot cast 'abc' to integer"]


# ---- functions ---------------------------------------------------------------------------------------------


def test_numeric_functions() -> None:
    assert ev("abs(a)", a=-3) == 3
    assert ev("round(x)", x=2.5) == 3.0  # half away from zero, not to even
    assert ev("round(x, 1)", x=-1.25) == -1.3
    assert ev("round(d, 1)", d=Decimal("1.25")) == Decimal("1.3")
    assert ev("round(a, -1)", a=15) == 20
    assert ev("floor(x)", x=-1.5) == -2
    assert ev("ceil(x)", x=1.2) == 2
    assert ev("sqrt(x)", x=9.0) == 3.0
    assert ev("power(a, 2)", a=3) == 9.0
    with pytest.raises(EvalError, match="negative"):
        ev("sqrt(x)", x=-1.0)


def test_string_functions() -> None:
    assert ev("lower(s)", s="AbC") == "abc"
    assert ev("upper(s)", s="AbC") == "ABC"
    assert ev("trim(s)", s="  a b  ") == "a b"
    assert ev("length(s)", s="héllo") == 5
    assert ev("substring(s, 2, 3)", s="hello") == "ell"
    assert ev("substring(s, 2)", s="hello") == "ello"
    assert ev("substring(s, 0, 3)", s="hello") == "he"  # positions 0..2; only 1..2 exist
    assert ev("substr(s, 10, 2)", s="hello") == ""
    assert ev("concat(s, a, 'x')", s="n", a=None) == "nx"  # concat skips NULLs
    assert ev("s || a", s="n", a=1) == "n1"
    with pytest.raises(EvalError, match="negative substring length"):
        ev("substring(s, 1, -1)", s="x")


def test_null_handling_functions() -> None:
    assert ev("coalesce(a, b, 0)", b=5) == 5
    assert ev("coalesce(a, x)", x=0.5) == 0.5
    assert isinstance(ev("coalesce(a, x)", a=1), float)
    assert ev("nullif(a, 0)", a=0) is None
    assert ev("nullif(a, 0)", a=3) == 3
    assert ev("greatest(a, b, 2)", a=1) == 2  # NULLs are skipped
    assert ev("least(a, b)") is None
    assert ev("greatest(a, x)", a=1, x=2.5) == 2.5


def test_timestamp_functions() -> None:
    t = datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)
    parts = ["year", "month", "day", "hour", "minute", "second"]
    assert [ev(f"{p}(t)", t=t) for p in parts] == [2026, 3, 4, 5, 6, 7]
    assert ev("epoch_millis(t)", t=t) == 1772600767890
    assert ev("from_epoch_millis(epoch_millis(t))", t=t) == t
    assert ev("t > '2026-01-01'", t=t) is True


def test_every_catalogue_function_has_an_implementation() -> None:
    from deployer.evaluation.functions import _SPECIAL, _STRICT, _TYPED
    from operators.functions import FUNCTIONS

    assert set(FUNCTIONS) == set(_STRICT) | set(_SPECIAL) | set(_TYPED)
