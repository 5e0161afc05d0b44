"""FROM PATTERN / FROM SEQUENCE and `e[i].f` as the parser reads them: the AST of every form, the
round trip through unparse, and the syntax errors with their line and column. Whether a pattern
makes sense (separators, quantifiers, aliases, durations) is the planner's, in test_pattern_errors."""

from __future__ import annotations

import pytest
from lark.parsers.lalr_analysis import LALR_Analyzer

from cpl import syntax_tree as ast
from cpl.errors import Diagnostics
from cpl.grammar import built_parser
from cpl.parser import parse
from cpl.syntax_errors import _in_pattern
from cpl.unparse import script as unparse_script

Step = ast.PatternStep
Absence = ast.PatternAbsence
Group = ast.PatternGroup
Every = ast.PatternEvery
Logical = ast.PatternLogical


def n(*parts: str) -> ast.Name:
    return ast.Name(parts)


def i(value: int) -> ast.Literal:
    return ast.Literal("int", value)


def op(o: str, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
    return ast.BinaryOp(o, left, right)


def sec(amount: int, unit: str = "sec") -> ast.Duration:
    return ast.Duration(amount, unit)


def seq(*items: ast.PatternElement, sep: str = "->") -> Group:
    return Group(items, (sep,) * (len(items) - 1))


def _parse(text: str) -> ast.Script:
    diags = Diagnostics()
    tree = parse(text, diags)
    assert not diags.items, [d.render(text) for d in diags.items]
    return tree


def _select(text: str) -> ast.Select:
    (stmt,) = _parse(text).statements
    assert isinstance(stmt, ast.Insert)
    return stmt.select


def _pattern(from_: str) -> ast.PatternFrom:
    select = _select(f"INSERT INTO o SELECT e1.x FROM {from_}")
    assert select.pattern is not None
    assert select.sources == ()
    return select.pattern


# (what follows FROM, the PatternFrom it is)
FORMS: list[tuple[str, ast.PatternFrom]] = [
    # counts and quantifiers
    ("PATTERN e1=a<3>", ast.PatternFrom("pattern", seq(Step("e1", "a", count=(3, 3))))),
    ("PATTERN e1=a<2:5>", ast.PatternFrom("pattern", seq(Step("e1", "a", count=(2, 5))))),
    ("PATTERN e1=a < 0 : 7 >", ast.PatternFrom("pattern", seq(Step("e1", "a", count=(0, 7))))),
    ("PATTERN e1=a<3:>", ast.PatternFrom("pattern", seq(Step("e1", "a", count=(3, None))))),
    ("PATTERN e1=a<:4>", ast.PatternFrom("pattern", seq(Step("e1", "a", count=(0, 4))))),
    (
        "PATTERN e1=a[x > 1]<2:>->e2=b",
        ast.PatternFrom("pattern", seq(Step("e1", "a", op(">", n("x"), i(1)), (2, None)), Step("e2", "b"))),
    ),
    ("SEQUENCE e1=a+", ast.PatternFrom("sequence", seq(Step("e1", "a", quantifier="+")))),
    (
        "SEQUENCE e1=a*, e2=b",
        ast.PatternFrom("sequence", seq(Step("e1", "a", quantifier="*"), Step("e2", "b"), sep=",")),
    ),
    (
        "SEQUENCE e1=a[x = 1]?",
        ast.PatternFrom("sequence", seq(Step("e1", "a", op("=", n("x"), i(1)), quantifier="?"))),
    ),
    # EVERY on a step, an AND/OR, an absence and a group; nested groups
    ("PATTERN EVERY e1=a -> e2=b", ast.PatternFrom("pattern", seq(Every(Step("e1", "a")), Step("e2", "b")))),
    (
        "PATTERN EVERY e1=a OR e2=b -> e3=c",
        ast.PatternFrom(
            "pattern", seq(Every(Logical("or", Step("e1", "a"), Step("e2", "b"))), Step("e3", "c"))
        ),
    ),
    ("PATTERN EVERY NOT a FOR 1 sec", ast.PatternFrom("pattern", seq(Every(Absence("a", wait=sec(1)))))),
    (
        "PATTERN EVERY (e1=a -> e2=b) -> e3=c",
        ast.PatternFrom("pattern", seq(Every(seq(Step("e1", "a"), Step("e2", "b"))), Step("e3", "c"))),
    ),
    (
        "PATTERN (e1=a -> (e2=b, (e3=c))) -> EVERY (e4=d)",
        ast.PatternFrom(
            "pattern",
            seq(
                seq(Step("e1", "a"), seq(Step("e2", "b"), seq(Step("e3", "c")), sep=",")),
                Every(seq(Step("e4", "d"))),
            ),
        ),
    ),
    ("PATTERN EVERY EVERY e1=a", ast.PatternFrom("pattern", seq(Every(Every(Step("e1", "a")))))),
    # AND / OR, absences on either side
    (
        "PATTERN e1=a -> NOT a[c] FOR 1 sec OR e2=b[y > 2]",
        ast.PatternFrom(
            "pattern",
            seq(
                Step("e1", "a"),
                Logical("or", Absence("a", n("c"), sec(1)), Step("e2", "b", op(">", n("y"), i(2)))),
            ),
        ),
    ),
    (
        "PATTERN e1=a -> NOT a[c] AND e2=b",
        ast.PatternFrom(
            "pattern", seq(Step("e1", "a"), Logical("and", Absence("a", n("c")), Step("e2", "b")))
        ),
    ),
    (
        "PATTERN e1=a AND NOT b[c] FOR 2 seconds",
        ast.PatternFrom(
            "pattern", seq(Logical("and", Step("e1", "a"), Absence("b", n("c"), sec(2, "seconds"))))
        ),
    ),
    (
        "PATTERN e1=a[x > 1] and e2=b[y < 2]",
        ast.PatternFrom(
            "pattern",
            seq(
                Logical("and", Step("e1", "a", op(">", n("x"), i(1))), Step("e2", "b", op("<", n("y"), i(2))))
            ),
        ),
    ),
    # absences first, in the middle, last
    (
        "PATTERN NOT a[x > 1] FOR 5 seconds -> e1=b",
        ast.PatternFrom(
            "pattern", seq(Absence("a", op(">", n("x"), i(1)), sec(5, "seconds")), Step("e1", "b"))
        ),
    ),
    (
        "PATTERN e1=a -> NOT b[k = e1.k] FOR 1 minute -> e2=c",
        ast.PatternFrom(
            "pattern",
            seq(
                Step("e1", "a"),
                Absence("b", op("=", n("k"), n("e1", "k")), sec(1, "minute")),
                Step("e2", "c"),
            ),
        ),
    ),
    ("PATTERN e1=a -> NOT b", ast.PatternFrom("pattern", seq(Step("e1", "a"), Absence("b")))),
    # separators are kept as written, whatever the kind (the planner checks them)
    (
        "PATTERN e1=a, e2=b -> e3=c",
        ast.PatternFrom("pattern", Group((Step("e1", "a"), Step("e2", "b"), Step("e3", "c")), (",", "->"))),
    ),
    ("SEQUENCE e1=a -> e2=b", ast.PatternFrom("sequence", seq(Step("e1", "a"), Step("e2", "b")))),
    # WITHIN and PARTITION BY
    ("PATTERN e1=a WITHIN 10 SECONDS", ast.PatternFrom("pattern", seq(Step("e1", "a")), sec(10, "seconds"))),
    (
        "PATTERN e1=a PARTITION BY idcaller",
        ast.PatternFrom("pattern", seq(Step("e1", "a")), partition=(n("idcaller"),)),
    ),
    (
        "SEQUENCE e1=a, e2=b WITHIN 1 hour PARTITION BY a.f, b.g",
        ast.PatternFrom(
            "sequence",
            seq(Step("e1", "a"), Step("e2", "b"), sep=","),
            sec(1, "hour"),
            (n("a", "f"), n("b", "g")),
        ),
    ),
    # quoted names, and soft keywords as names
    ('PATTERN "every"="from"', ast.PatternFrom("pattern", seq(Step("every", "from")))),
    ("PATTERN size=window", ast.PatternFrom("pattern", seq(Step("size", "window")))),
    # keywords in any case
    (
        "Pattern Every e1=a -> not b For 1 Sec Within 2 Minutes Partition By k",
        ast.PatternFrom(
            "pattern", seq(Every(Step("e1", "a")), Absence("b", wait=sec(1))), sec(2, "minutes"), (n("k"),)
        ),
    ),
    (
        "sequence EVERY e1=a, e2=b Or e3=c",
        ast.PatternFrom(
            "sequence", seq(Every(Step("e1", "a")), Logical("or", Step("e2", "b"), Step("e3", "c")), sep=",")
        ),
    ),
]


@pytest.mark.parametrize(("text", "expected"), FORMS, ids=[f[0] for f in FORMS])
def test_each_form_gives_its_ast(text: str, expected: ast.PatternFrom) -> None:
    assert _pattern(text) == expected


UNITS = [
    "MILLISECOND",
    "milliseconds",
    "ms",
    "Second",
    "SECONDS",
    "sec",
    "minute",
    "MINUTES",
    "Min",
    "hour",
    "Hours",
    "day",
    "DAYS",
]


@pytest.mark.parametrize("unit", UNITS)
def test_within_takes_every_unit(unit: str) -> None:
    assert _pattern(f"PATTERN e1=a -> e2=b WITHIN 7 {unit}").within == ast.Duration(7, unit.lower())
    assert _pattern(f"PATTERN e1=a -> NOT b FOR 7 {unit}").body.items[1] == Absence(
        "b", wait=ast.Duration(7, unit.lower())
    )


EXAMPLES = [
    (
        "INSERT INTO rising\n"
        "SELECT e1.symbol AS symbol, e1.price AS p1, e2.price AS p2\n"
        "FROM PATTERN EVERY e1=trades[price > 20] -> e2=trades[symbol = e1.symbol AND price > e1.price]\n"
        "     WITHIN 10 SECONDS;",
        ast.Select(
            (
                ast.SelectItem(n("e1", "symbol"), "symbol"),
                ast.SelectItem(n("e1", "price"), "p1"),
                ast.SelectItem(n("e2", "price"), "p2"),
            ),
            (),
            pattern=ast.PatternFrom(
                "pattern",
                seq(
                    Every(Step("e1", "trades", op(">", n("price"), i(20)))),
                    Step(
                        "e2",
                        "trades",
                        op(
                            "and",
                            op("=", n("symbol"), n("e1", "symbol")),
                            op(">", n("price"), n("e1", "price")),
                        ),
                    ),
                ),
                sec(10, "seconds"),
            ),
        ),
    ),
    (
        "INSERT INTO fraud\n"
        "SELECT e1.idcaller, e2[0].ts AS first_call, e2[last].duration AS last_duration,\n"
        "       count(e2.idreceiver) AS calls, e3.duration AS long_call\n"
        "FROM PATTERN EVERY e1=calls[duration < 5]\n"
        "             -> e2=calls[idreceiver <> e1.idreceiver]<3:>\n"
        "             -> e3=calls[duration > 3600]\n"
        "     WITHIN 10 MINUTES\n"
        "PARTITION BY idcaller;",
        ast.Select(
            (
                ast.SelectItem(n("e1", "idcaller")),
                ast.SelectItem(ast.Indexed("e2", "ts", index=0), "first_call"),
                ast.SelectItem(ast.Indexed("e2", "duration", from_last=0), "last_duration"),
                ast.SelectItem(ast.Call("count", (n("e2", "idreceiver"),)), "calls"),
                ast.SelectItem(n("e3", "duration"), "long_call"),
            ),
            (),
            pattern=ast.PatternFrom(
                "pattern",
                seq(
                    Every(Step("e1", "calls", op("<", n("duration"), i(5)))),
                    Step("e2", "calls", op("<>", n("idreceiver"), n("e1", "idreceiver")), (3, None)),
                    Step("e3", "calls", op(">", n("duration"), i(3600))),
                ),
                sec(10, "minutes"),
                (n("idcaller"),),
            ),
        ),
    ),
    (
        "INSERT INTO peaks\n"
        "SELECT e1.price AS start, e2[last].price AS top, e3.price AS fall\n"
        "FROM SEQUENCE EVERY e1=trades, e2=trades[price > e2[last].price]+, "
        "e3=trades[price < e2[last].price];",
        ast.Select(
            (
                ast.SelectItem(n("e1", "price"), "start"),
                ast.SelectItem(ast.Indexed("e2", "price", from_last=0), "top"),
                ast.SelectItem(n("e3", "price"), "fall"),
            ),
            (),
            pattern=ast.PatternFrom(
                "sequence",
                seq(
                    Every(Step("e1", "trades")),
                    Step(
                        "e2",
                        "trades",
                        op(">", n("price"), ast.Indexed("e2", "price", from_last=0)),
                        quantifier="+",
                    ),
                    Step("e3", "trades", op("<", n("price"), ast.Indexed("e2", "price", from_last=0))),
                    sep=",",
                ),
            ),
        ),
    ),
    (
        "INSERT INTO unanswered\n"
        "SELECT e1.idcaller, e1.ts\n"
        "FROM PATTERN EVERY e1=alarms -> NOT acks[id = e1.id] FOR 5 MINUTES;",
        ast.Select(
            (ast.SelectItem(n("e1", "idcaller")), ast.SelectItem(n("e1", "ts"))),
            (),
            pattern=ast.PatternFrom(
                "pattern",
                seq(
                    Every(Step("e1", "alarms")),
                    Absence("acks", op("=", n("id"), n("e1", "id")), sec(5, "minutes")),
                ),
            ),
        ),
    ),
]


@pytest.mark.parametrize(("text", "expected"), EXAMPLES, ids=["rising", "fraud", "peaks", "unanswered"])
def test_the_language_examples_parse(text: str, expected: ast.Select) -> None:
    assert _select(text) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("e2[0].ts", ast.Indexed("e2", "ts", index=0)),
        ("e2[12].ts", ast.Indexed("e2", "ts", index=12)),
        ("e2[last].ts", ast.Indexed("e2", "ts", from_last=0)),
        ("e2[LAST].ts", ast.Indexed("e2", "ts", from_last=0)),
        ("e2[last - 1].ts", ast.Indexed("e2", "ts", from_last=1)),
        ("e2[Last-2].ts", ast.Indexed("e2", "ts", from_last=2)),
        ('"e 2"[0]."select"', ast.Indexed("e 2", "select", index=0)),
        (
            "e2[0].ts + e2[last].ts",
            op("+", ast.Indexed("e2", "ts", index=0), ast.Indexed("e2", "ts", from_last=0)),
        ),
        ("e1.price", n("e1", "price")),
        ("last", n("last")),
        ("count(e2.idreceiver)", ast.Call("count", (n("e2", "idreceiver"),))),
        ("avg(e2[0].ts)", ast.Call("avg", (ast.Indexed("e2", "ts", index=0),))),
    ],
)
def test_indexed_access_to_a_collected_event(written: str, expected: ast.Expr) -> None:
    select = _select(f"INSERT INTO o SELECT {written} FROM PATTERN e1=a -> e2=b<2:>")
    assert select.items[0].expr == expected


def test_the_rest_of_the_select_follows_the_pattern() -> None:
    select = _select(
        "INSERT INTO o SELECT e1.x FROM PATTERN e1=a -> e2=b WITHIN 1 sec PARTITION BY k "
        "WHERE e1.x > e2.x ON SQL q, r, e1.x, y"
    )
    assert select.pattern == ast.PatternFrom(
        "pattern", seq(Step("e1", "a"), Step("e2", "b")), sec(1), (n("k"),)
    )
    assert select.where == op(">", n("e1", "x"), n("e2", "x"))
    assert select.on_sql == ast.OnSql("q", "r", (("e1", "x"), ("y",)))


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO o SELECT x FROM s",
        "INSERT INTO o SELECT x FROM s AS t WINDOW TIME SIZE 1 sec, u WINDOW w",
        "INSERT INTO o SELECT x FROM pattern_s, sequence_s",
    ],
)
def test_a_list_of_streams_is_still_a_list_of_streams(text: str) -> None:
    select = _select(text)
    assert select.pattern is None
    assert select.sources and all(isinstance(s, ast.FromItem) for s in select.sources)


def _at(source: str, pos: ast.Pos) -> str:
    lines = source.splitlines()
    if pos.line == pos.end_line:
        return lines[pos.line - 1][pos.col - 1 : pos.end_col - 1]
    return "\n".join(
        [
            lines[pos.line - 1][pos.col - 1 :],
            *lines[pos.line : pos.end_line - 1],
            lines[pos.end_line - 1][: pos.end_col - 1],
        ]
    )


def test_every_node_has_its_place_in_the_script() -> None:
    text = (
        "CREATE STREAMSCHEMA a WITH x integer;\n"
        "INSERT INTO o SELECT e2[last - 1].x AS p\n"
        "  FROM SEQUENCE EVERY (e1=a[x > 1], NOT b FOR 1 sec OR e2=b<2:>) -> NOT c[y = 1] AND e3=c\n"
        "  WITHIN 2 ms PARTITION BY a.k, b.k;"
    )
    stmt = _parse(text).statements[1]
    assert isinstance(stmt, ast.Insert)
    select = stmt.select
    pattern = select.pattern
    assert pattern is not None
    assert _at(text, select.items[0].expr.pos) == "e2[last - 1].x"  # type: ignore[union-attr]
    assert _at(text, pattern.pos).startswith("SEQUENCE EVERY (") and _at(text, pattern.pos).endswith("b.k")
    body = pattern.body
    assert _at(text, body.pos) == "EVERY (e1=a[x > 1], NOT b FOR 1 sec OR e2=b<2:>) -> NOT c[y = 1] AND e3=c"
    assert [_at(text, p) for p in body.separator_pos] == ["->"]
    every, logical = body.items
    assert isinstance(every, Every) and isinstance(logical, Logical)
    assert _at(text, every.pos) == "EVERY (e1=a[x > 1], NOT b FOR 1 sec OR e2=b<2:>)"
    group = every.body
    assert isinstance(group, Group)
    assert _at(text, group.pos) == "(e1=a[x > 1], NOT b FOR 1 sec OR e2=b<2:>)"
    assert [_at(text, p) for p in group.separator_pos] == [","]
    step, either = group.items
    assert isinstance(step, Step) and isinstance(either, Logical)
    assert (_at(text, step.pos), _at(text, step.alias_pos), _at(text, step.stream_pos)) == (
        "e1=a[x > 1]",
        "e1",
        "a",
    )
    assert _at(text, either.pos) == "NOT b FOR 1 sec OR e2=b<2:>"
    absence, counted = either.left, either.right
    assert isinstance(absence, Absence) and isinstance(counted, Step)
    assert (_at(text, absence.pos), _at(text, absence.stream_pos)) == ("NOT b FOR 1 sec", "b")
    assert absence.wait is not None and _at(text, absence.wait.pos) == "1 sec"
    assert _at(text, counted.pos) == "e2=b<2:>"
    assert _at(text, logical.pos) == "NOT c[y = 1] AND e3=c"
    assert pattern.within is not None and _at(text, pattern.within.pos) == "2 ms"
    assert [_at(text, k.pos) for k in pattern.partition] == ["a.k", "b.k"]


ROUND_TRIPS = [f"INSERT INTO o SELECT e1.x FROM {text};" for text, _ in FORMS] + [
    text for text, _ in EXAMPLES
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_unparse_gives_the_same_tree_back(text: str) -> None:
    tree = _parse(text)
    again = _parse(unparse_script(tree))
    assert again == tree


def test_unparse_puts_back_every_and_the_groups() -> None:
    body = Group(
        (
            Every(Group((Step("e1", "a"), Every(Logical("and", Absence("b"), Step("e2", "b")))), (",",))),
            Group((Group((Step("e3", "c"),)),)),
            Every(Every(Step("e4", "d", count=(0, 3)))),
        ),
        ("->", ","),
    )
    select = ast.Select(
        (ast.SelectItem(ast.Indexed("e4", "select", from_last=2), "p"),),
        (),
        pattern=ast.PatternFrom("pattern", body, ast.Duration(1, "minute"), (n("e1", "k"),)),
    )
    tree = ast.Script((ast.Insert("o", select),))
    text = unparse_script(tree)
    assert text == (
        'INSERT INTO o SELECT e4[last - 2]."select" AS p FROM PATTERN EVERY (e1=a, EVERY NOT b AND e2=b) -> '
        "((e3=c)), EVERY EVERY e4=d<0:3> WITHIN 1 MINUTE PARTITION BY e1.k;\n"
    )
    assert _parse(text) == tree


# (the statement's FROM, where the error points, the message)
ERRORS = [
    ("PATTERN e1 a -> e2=b", "a -> e2", "unexpected 'a'; expected '=' (a step is written alias=stream)"),
    ("PATTERN e1<a", "<a", "unexpected '<'; a step is written alias=stream"),
    ("PATTERN e1=a[x > 1 -> e2=b", "-> e2", "unexpected '->'"),
    ("PATTERN e1=a[", ";", "statement ends too early"),
    (
        "PATTERN e1=a<3: -> e2=b",
        "-> e2",
        "unexpected '->'; expected one of '>', a number (a count is written <n>, <n:m>, <n:> or <:m>)",
    ),
    ("PATTERN e1=a<3:", ";", "statement ends too early; expected one of '>', a number (a count is written"),
    (
        "PATTERN e1=a<3:5 x",
        "x;",
        "unexpected 'x'; expected '>' (a count is written <n>, <n:m>, <n:> or <:m>)",
    ),
    ("PATTERN e1=a<3<", "<;", "unexpected '<'; a count is written <n>, <n:m>, <n:> or <:m>"),
    ("PATTERN e1=a<:>", "<:>", "a count needs a number; a count is written <n>, <n:m>, <n:> or <:m>"),
    ("PATTERN e1=a<99999999999999999999>", "99999999999999999999", "a count is out of range for bigint"),
    ("PATTERN e1=a-", "-;", "unexpected '-' after a step; a quantifier is +, * or ?"),
    ("PATTERN e1=a AND e2=b AND e3=c", "AND e3", "unexpected 'AND'"),
    ("PATTERN", ";", "statement ends too early; expected a step alias=stream, NOT, EVERY or '('"),
    ("PATTERN WHERE x > 1", "WHERE", "unexpected 'WHERE'; expected a step alias=stream, NOT, EVERY or '('"),
    ("PATTERN e1=a ->", ";", "statement ends too early; expected a step alias=stream, NOT, EVERY or '('"),
    ("PATTERN e1=a WITHIN", ";", "statement ends too early; expected a number"),
    ("PATTERN e1=a PARTITION k", "k;", "unexpected 'k'; expected BY"),
    ("PATTERN NOT b FOR", ";", "statement ends too early; expected a number"),
    # EVERY is reserved: `every=b` is EVERY then '='
    ("PATTERN e1=a, every=b", "=b", "unexpected '='; expected a step alias=stream, NOT, EVERY or '('"),
]


def _error(statement: str) -> str:
    text = "CREATE STREAMSCHEMA a WITH x integer;\n" + statement
    diags = Diagnostics()
    parse(text, diags)
    assert len(diags.items) == 1, [d.render(text) for d in diags.items]
    return diags.items[0].render(text, "t.cpl")


@pytest.mark.parametrize(("from_", "at", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_a_malformed_pattern_is_a_syntax_error_at_its_place(from_: str, at: str, message: str) -> None:
    statement = f"INSERT INTO o SELECT e1.x FROM {from_};"
    rendered = _error(statement)
    column = statement.index(at, len("INSERT INTO o SELECT e1.x FROM ")) + 1
    assert rendered.startswith(f"t.cpl:2:{column}: error: {message}"), rendered


@pytest.mark.parametrize(
    ("written", "at", "message"),
    [
        (
            "e2[first].x",
            "first",
            "unexpected 'first'; expected a number, last or last - n between the brackets",
        ),
        ("e2[-1].x", "-1", "unexpected '-'; expected a number, last or last - n between the brackets"),
        ("e2[0 - 1].x", "- 1", "unexpected '-'; expected a number, last or last - n between the brackets"),
        ("e2[last + 1].x", "+ 1", "unexpected '+'; expected a number, last or last - n between the brackets"),
        ("e2[last * 2].x", "* 2", "unexpected '*'; expected a number, last or last - n between the brackets"),
        ("e2[last - k].x", "k]", "unexpected 'k'; expected a number, last or last - n between the brackets"),
        (
            "e2[last - 1 2].x",
            "2]",
            "unexpected '2'; expected a number, last or last - n between the brackets",
        ),
        (
            "e2[last -].x",
            "-]",
            "'last -' needs a number; expected a number, last or last - n between the brackets",
        ),
        ("e2[1.5].x", "1.5", "unexpected '1.5'; expected a number, last or last - n between the brackets"),
        ("e2[].x", "]", "unexpected ']'; expected a number, last or last - n between the brackets"),
        ("e2[last).x", ")", "unexpected ')'; expected ']' (an index is a number, last or last - n)"),
        ("e2[99999999999999999999].x", "9", "an index is out of range for bigint"),
        ("e2[0]", " FROM", "unexpected 'FROM'; expected '.'"),
    ],
)
def test_a_malformed_index_is_a_syntax_error_at_its_place(written: str, at: str, message: str) -> None:
    statement = f"INSERT INTO o SELECT {written} FROM PATTERN e1=a -> e2=b<2:>;"
    rendered = _error(statement)
    column = statement.index(at, len("INSERT INTO o SELECT e2")) + 1 + (1 if at.startswith(" ") else 0)
    assert rendered.startswith(f"t.cpl:2:{column}: error: {message}"), rendered


def test_each_pattern_hint_is_given_only_at_its_place() -> None:
    """syntax_errors tells the places of a pattern apart by the tokens the parser expects there;
    check it against every state of the LALR table: each hint only where it belongs, and each used."""
    analyzer = LALR_Analyzer(built_parser(cached=False).parser.parser.parser_conf, debug=True)
    analyzer.compute_lalr()
    seen: set[str] = set()
    for closure, actions in analyzer.parse_table.states.items():
        kernel = [rp for rp in closure if rp.index > 0]
        after_number = {rp.rule.expansion[rp.index - 1].name for rp in kernel} == {"INT"}
        hint = _in_pattern(set(actions), after_number)
        if hint is None:
            continue
        rules = {str(rp.rule.origin.name) for rp in kernel}
        if "a step is written" in hint:
            place, fits = "step", rules == {"pattern_step"}
        elif "a count is written" in hint:
            place, fits = "count", rules == {"pattern_quantity"}
        elif "EVERY" in hint:
            place = "element"
            fits = all(
                r in ("pattern_from", "pattern_element", "pattern_sep") or r.startswith("__pattern_body")
                for r in rules
            )
        else:  # an index: just after `e2[`, or among its parts
            place = "index"
            fits = all(
                r in ("pattern_index", "index_part") or r.startswith("__pattern_index") for r in rules
            ) or all(
                str(rp.rule.origin.name) == "atom" and rp.rule.expansion[rp.index - 1].name == "LSQB"
                for rp in kernel
            )
        assert fits, (hint, sorted(rules))
        seen.add(place)
    assert seen == {"step", "count", "element", "index"}
