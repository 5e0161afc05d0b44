"""Property tests: parse ∘ unparse is the identity on ASTs, and no input text crashes the compiler."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpl import syntax_tree as ast
from cpl.compiler import compile_script
from cpl.errors import CompileError, Diagnostics
from cpl.parser import parse
from cpl.unparse import script as unparse_script

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")

# Names: plain identifiers, keywords (which unparse must quote) and odd quoted names.
names = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    st.sampled_from(["select", "timestamp", "from", "Window", "size", "key", "end"]),
    st.text(alphabet=string.ascii_letters + ' "-.;', min_size=1, max_size=8),
)
literals = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda v: ast.Literal("int", v)),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-1000, max_value=1000).map(
        lambda d: ast.Literal("decimal", f"{d:.3f}")
    ),
    st.text(max_size=10).filter(lambda s: "\r" not in s).map(lambda s: ast.Literal("string", s)),
    st.booleans().map(lambda b: ast.Literal("bool", b)),
    st.just(ast.Literal("null", None)),
    st.just(ast.Literal("timestamp", "2026-01-02 03:04:05")),
)
columns = st.lists(names, min_size=1, max_size=2).map(lambda p: ast.Name(tuple(p)))


def _not_numeric_literal(e: ast.Expr) -> bool:
    # "-5" parses as the literal -5, never as negation of 5: so negation of a number is not generated.
    return not (isinstance(e, ast.Literal) and e.kind in ("int", "decimal"))


def _extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    ops = ["+", "-", "*", "/", "%", "||", "=", "<>", "<", "<=", ">", ">=", "and", "or"]
    return st.one_of(
        st.builds(ast.BinaryOp, st.sampled_from(ops), children, children),
        st.builds(ast.UnaryOp, st.just("not"), children),
        st.builds(ast.UnaryOp, st.just("-"), children.filter(_not_numeric_literal)),
        st.builds(ast.IsNull, children, st.booleans()),
        st.builds(ast.Between, children, children, children, st.booleans()),
        st.builds(ast.InList, children, st.lists(children, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(ast.Like, children, children, st.booleans()),
        st.builds(
            ast.Case,
            st.none() | children,
            st.lists(st.tuples(children, children), min_size=1, max_size=2).map(tuple),
            st.none() | children,
        ),
        st.builds(
            ast.Cast, children, st.sampled_from([ast.TypeName("integer"), ast.TypeName("decimal", (10, 2))])
        ),
        st.builds(
            ast.Call, st.sampled_from(["abs", "coalesce", "sum"]), st.lists(children, max_size=2).map(tuple)
        ),
        st.just(ast.Call("count", (), star=True)),
    )


exprs = st.recursive(literals | columns, _extend, max_leaves=6)


durations = st.builds(ast.Duration, st.integers(1, 99), st.sampled_from(["seconds", "ms", "minute", "days"]))


def _step(draw: st.DrawFn) -> ast.PatternStep | ast.PatternAbsence:
    cond = draw(st.none() | exprs)
    if draw(st.integers(0, 3)) == 0:
        return ast.PatternAbsence(draw(names), cond, draw(st.none() | durations))
    count = draw(
        st.none()
        | st.integers(0, 5).map(lambda n: (n, n))
        | st.tuples(st.integers(0, 3), st.none() | st.integers(3, 9))
    )
    quant = None if count is not None else draw(st.none() | st.sampled_from(["+", "*", "?"]))
    return ast.PatternStep(draw(names), draw(names), cond, count, quant)


@st.composite
def pattern_groups(draw: st.DrawFn, depth: int = 0) -> ast.PatternGroup:
    items: list[ast.PatternElement] = []
    for _ in range(draw(st.integers(1, 3))):
        form = draw(st.integers(0, 5 if depth < 2 else 3))
        element: ast.PatternElement
        if form <= 1:
            element = _step(draw)
        elif form == 2:
            element = ast.PatternLogical(draw(st.sampled_from(["and", "or"])), _step(draw), _step(draw))
        elif form == 3:
            element = ast.PatternEvery(_step(draw))
        elif form == 4:
            element = ast.PatternEvery(draw(pattern_groups(depth + 1)))
        else:
            element = draw(pattern_groups(depth + 1))
        items.append(element)
    seps = tuple(draw(st.sampled_from(["->", ","])) for _ in items[1:])
    return ast.PatternGroup(tuple(items), seps)


@st.composite
def pattern_froms(draw: st.DrawFn) -> ast.PatternFrom:
    partition = tuple(draw(st.lists(columns, max_size=2)))
    return ast.PatternFrom(
        draw(st.sampled_from(["pattern", "sequence"])),
        draw(pattern_groups()),
        draw(st.none() | durations),
        partition,
    )


indexed = st.builds(ast.Indexed, names, names, st.integers(0, 9), st.none()) | st.builds(
    ast.Indexed, names, names, st.none(), st.integers(0, 9)
)


@st.composite
def statements(draw: st.DrawFn) -> ast.Statement:
    kind = draw(st.sampled_from(["schema", "window", "insert", "query", "table"]))
    types = st.sampled_from(
        [ast.TypeName("integer"), ast.TypeName("varchar", (20,)), ast.TypeName("timestamp")]
    )
    if kind == "schema":
        fields = tuple(draw(st.lists(st.builds(ast.FieldDef, names, types), min_size=1, max_size=3)))
        ts = draw(st.none() | names)
        wm = draw(st.none() | st.builds(ast.Duration, st.integers(1, 99), st.just("seconds"))) if ts else None
        return ast.CreateStreamSchema(draw(names), fields, ts, wm)
    if kind == "window":
        spec = draw(
            st.one_of(
                st.builds(
                    ast.WindowSpec, st.just("tuple"), st.integers(1, 50), st.none() | st.integers(1, 50)
                ),
                st.builds(
                    ast.WindowSpec,
                    st.just("time"),
                    st.builds(ast.Duration, st.integers(1, 9), st.just("day")),
                    st.none() | st.builds(ast.Duration, st.integers(1, 9), st.just("hours")),
                ),
                st.builds(ast.WindowSpec, st.just("batch"), st.none(), st.none(), exprs, exprs),
            )
        )
        return ast.CreateWindow(draw(names), spec)
    if kind == "query":
        return ast.CreateSqlQuery(
            draw(names), draw(names), draw(st.text(max_size=30)), (), draw(st.none() | st.integers(1, 9))
        )
    if kind == "table":
        cols = tuple(
            draw(
                st.lists(
                    st.builds(ast.ColumnDef, names, types, st.booleans(), st.booleans()),
                    min_size=1,
                    max_size=3,
                )
            )
        )
        return ast.CreateTable(draw(names), cols, (), draw(names))
    items = tuple(draw(st.lists(st.builds(ast.SelectItem, exprs, st.none() | names), min_size=1, max_size=3)))
    sources = tuple(
        draw(
            st.lists(
                st.builds(ast.FromItem, names, st.none() | names, st.none() | names),
                min_size=1,
                max_size=2,
            )
        )
    )
    on_sql = draw(
        st.none()
        | st.builds(
            ast.OnSql,
            names,
            names,
            st.lists(st.lists(names, min_size=1, max_size=2).map(tuple), min_size=1, max_size=3).map(tuple),
            st.booleans(),
        )
    )
    pattern = draw(st.none() | pattern_froms())
    if pattern is not None:
        sources = ()
        items = (*items, ast.SelectItem(draw(indexed), draw(names)))
    select = ast.Select(
        items,
        sources,
        draw(st.none() | exprs),
        tuple(draw(st.lists(exprs, max_size=2))),
        draw(st.none() | exprs),
        on_sql,
        pattern=pattern,
    )
    return ast.Insert(draw(names), select, draw(st.booleans()))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statements(), min_size=1, max_size=4))
def test_parse_unparse_roundtrip(stmts: list[ast.Statement]) -> None:
    tree = ast.Script(tuple(stmts))
    text = unparse_script(tree)
    diags = Diagnostics()
    again = parse(text, diags)
    assert not diags.items, (text, [d.render(text) for d in diags.items])
    assert again == tree, text


_cpl_words = st.sampled_from(
    "CREATE STREAMSCHEMA WITH INSERT INTO SELECT FROM WHERE GROUP BY HAVING WINDOW TIME TUPLE SIZE "
    "ADVANCE ON SQL AS ( ) , ; * + - 'x' \"y\" 1 2.5 a b timestamp integer sum count CASE WHEN END".split()
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_cpl_words, max_size=40).map(" ".join)))
def test_any_text_gives_diagnostics_not_crashes(text: str) -> None:
    try:
        compile_script(text)
    except CompileError as err:
        assert err.errors, "a CompileError always carries at least one error"
        rendered = err.render()
        assert "Traceback" not in rendered
        for d in err.errors:
            assert d.message
