"""Text → AST. Splits the script into statements, parses each with the packaged LALR grammar and
turns lark's trees into `cpl.ast` nodes carrying absolute line/column positions.

Parsing one statement at a time gives error recovery for free: a syntax error is reported and the
next statement is parsed as usual, so a script with several errors reports all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from cpl import ast
from cpl.ast import Pos
from cpl.errors import Diagnostics

# Limits that keep a hostile or broken script from exhausting the compiler.
MAX_SCRIPT_CHARS = 2_000_000
MAX_STATEMENTS = 20_000
MAX_TREE_DEPTH = 200  # parse-tree levels; lark transforms recursively, so keep well under the stack limit
MAX_EXPR_DEPTH = 100  # levels of an expression after parsing
MAX_STRING_CHARS = 65_536
MAX_INT = 2**63 - 1


@cache
def _lark() -> Lark:
    grammar = resources.files("cpl").joinpath("cpl.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="basic", propagate_positions=True, maybe_placeholders=False)


class CplSyntaxError(Exception):
    def __init__(self, message: str, pos: Pos):
        super().__init__(message)
        self.message = message
        self.pos = pos


# ---- splitting ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    text: str
    line: int  # where text starts in the script (1-based)
    col: int


def split_statements(source: str) -> Iterator[Chunk]:
    """Yield the statements of a script, split on semicolons outside strings, names and comments."""
    i, n = 0, len(source)
    start, line, col = 0, 1, 1
    start_line, start_col = 1, 1
    mode = ""  # "" | "'" | '"' | "--" | "/*"

    def advance(k: int) -> None:
        nonlocal i, line, col
        for _ in range(k):
            if source[i] == "\n":
                line, col = line + 1, 1
            else:
                col += 1
            i += 1

    while i < n:
        c = source[i]
        if mode == "":
            if c == ";":
                yield Chunk(source[start:i], start_line, start_col)
                advance(1)
                start, start_line, start_col = i, line, col
                continue
            if c in "'\"":
                mode = c
            elif source.startswith("--", i):
                mode = "--"
            elif source.startswith("/*", i):
                mode = "/*"
                advance(2)
                continue
        elif mode in "'\"":
            if c == mode:
                if i + 1 < n and source[i + 1] == mode:  # doubled quote escapes itself
                    advance(2)
                    continue
                mode = ""
        elif mode == "--":
            if c == "\n":
                mode = ""
        elif mode == "/*" and source.startswith("*/", i):
            mode = ""
            advance(2)
            continue
        advance(1)
    yield Chunk(source[start:], start_line, start_col)


def _blank(text: str) -> bool:
    """True when a chunk holds only white space and comments."""
    return all(ch.isspace() for ch in _comment_free(text))


def _comment_free(text: str) -> Iterator[str]:
    i, n = 0, len(text)
    while i < n:
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            yield text[i]
            i += 1


# ---- tree → AST -----------------------------------------------------------------------------------

KEYWORD_TOKENS = frozenset(
    """CREATE STREAMSCHEMA WITH BY WATERMARK AS TUPLE TIME BATCH SIZE ADVANCE START STOP DATASTORE TYPE
    SQLQUERY ON CACHE ROWS TTL TABLE PRIMARY KEY IN INSERT INTO SELECT FROM WHERE GROUP HAVING SQL
    RETURNS OUTER AND OR NOT IS NULL BETWEEN LIKE CASE WHEN THEN ELSE END CAST WINDOW DISTINCT
    TIMESTAMP""".split()
)


@dataclass(frozen=True)
class NameTok:
    text: str
    pos: Pos


def _span(a: Pos, b: Pos) -> Pos:
    return Pos(a.line, a.col, b.end_line, b.end_col)


def _expr_pos(e: Any) -> Pos:
    return getattr(e, "pos", ast.NOPOS)


@v_args(meta=True)
class _ToAst(Transformer[Token, Any]):
    def __init__(self, chunk: Chunk):
        super().__init__()
        self.line0 = chunk.line
        self.col0 = chunk.col

    # positions
    def _abs(self, line: int, col: int) -> tuple[int, int]:
        return self.line0 + line - 1, col + (self.col0 - 1 if line == 1 else 0)

    def _pos(self, meta: Any) -> Pos:
        if getattr(meta, "empty", False) or not hasattr(meta, "line"):
            return ast.NOPOS
        l1, c1 = self._abs(meta.line, meta.column)
        l2, c2 = self._abs(meta.end_line, meta.end_column)
        return Pos(l1, c1, l2, c2)

    def _tpos(self, tok: Token) -> Pos:
        l1, c1 = self._abs(tok.line or 1, tok.column or 1)
        l2, c2 = self._abs(tok.end_line or 1, tok.end_column or 1)
        return Pos(l1, c1, l2, c2)

    @staticmethod
    def _items(children: list[Any]) -> list[Any]:
        return [c for c in children if not (isinstance(c, Token) and c.type in KEYWORD_TOKENS)]

    @staticmethod
    def _has(children: list[Any], kw: str) -> bool:
        return any(isinstance(c, Token) and c.type == kw for c in children)

    # names
    def name(self, meta: Any, children: list[Token]) -> NameTok:
        tok = children[0]
        text = str(tok)
        if tok.type == "QUOTED_NAME":
            text = text[1:-1].replace('""', '"')
        return NameTok(text, self._tpos(tok))

    def qualified(self, meta: Any, children: list[NameTok]) -> tuple[NameTok, ...]:
        return tuple(children)

    def type_name(self, meta: Any, children: list[Token]) -> ast.TypeName:
        args = tuple(int(c) for c in children[1:])
        return ast.TypeName(str(children[0]).lower(), args, self._pos(meta))

    def duration(self, meta: Any, children: list[Any]) -> ast.Duration:
        return ast.Duration(int(children[0]), children[1].text.lower(), self._pos(meta))

    # declarations
    def create_schema(self, meta: Any, children: list[Any]) -> ast.CreateStreamSchema:
        items = self._items(children)
        name: NameTok = items[0]
        fields = tuple(i for i in items[1:] if isinstance(i, ast.FieldDef))
        et = next((i for i in items if isinstance(i, tuple) and len(i) == 3), None)
        return ast.CreateStreamSchema(
            name.text,
            fields,
            et[0].text if et else None,
            et[1] if et else None,
            pos=self._pos(meta),
            name_pos=name.pos,
            timestamp_pos=et[0].pos if et else ast.NOPOS,
        )

    def field_def(self, meta: Any, children: list[Any]) -> ast.FieldDef:
        return ast.FieldDef(children[0].text, children[1], self._pos(meta))

    def event_time(self, meta: Any, children: list[Any]) -> tuple[NameTok, ast.Duration | None, str]:
        items = self._items(children)
        return (items[0], items[1] if len(items) > 1 else None, "event_time")

    def create_window(self, meta: Any, children: list[Any]) -> ast.CreateWindow:
        items = self._items(children)
        return ast.CreateWindow(items[0].text, items[1], self._pos(meta))

    def tuple_window(self, meta: Any, children: list[Any]) -> ast.WindowSpec:
        nums = [int(c) for c in children if isinstance(c, Token) and c.type == "INT"]
        return ast.WindowSpec("tuple", nums[0], nums[1] if len(nums) > 1 else None, pos=self._pos(meta))

    def time_window(self, meta: Any, children: list[Any]) -> ast.WindowSpec:
        ds = [c for c in children if isinstance(c, ast.Duration)]
        return ast.WindowSpec("time", ds[0], ds[1] if len(ds) > 1 else None, pos=self._pos(meta))

    def batch_window(self, meta: Any, children: list[Any]) -> ast.WindowSpec:
        items = self._items(children)
        return ast.WindowSpec("batch", start=items[0], stop=items[1], pos=self._pos(meta))

    def create_datastore(self, meta: Any, children: list[Any]) -> ast.CreateDataStore:
        items = self._items(children)
        return ast.CreateDataStore(items[0].text, items[1].text.lower(), self._pos(meta), items[1].pos)

    def create_sqlquery(self, meta: Any, children: list[Any]) -> ast.CreateSqlQuery:
        items = self._items(children)
        name, store, text_tok = items[0], items[1], items[2]
        returns = next((i for i in items if isinstance(i, list)), [])
        cache = next((i for i in items if isinstance(i, tuple)), None)
        return ast.CreateSqlQuery(
            name.text,
            store.text,
            _unquote(text_tok, self._tpos(text_tok)),
            tuple(returns),
            cache[0] if cache else None,
            cache[1] if cache else None,
            pos=self._pos(meta),
            store_pos=store.pos,
            text_pos=self._tpos(text_tok),
        )

    def returns(self, meta: Any, children: list[Any]) -> list[ast.FieldDef]:
        return [c for c in children if isinstance(c, ast.FieldDef)]

    def cache(self, meta: Any, children: list[Any]) -> tuple[int, ast.Duration | None]:
        items = self._items(children)
        return (int(items[0]), items[1] if len(items) > 1 else None)

    def create_table(self, meta: Any, children: list[Any]) -> ast.CreateTable:
        items = self._items(children)
        name: NameTok = items[0]
        cols = tuple(i for i in items if isinstance(i, ast.ColumnDef))
        keys = [i for i in items if isinstance(i, list)]
        rest = [i for i in items[1:] if isinstance(i, NameTok)]
        ttl = next((i for i in items if isinstance(i, ast.Duration)), None)
        store = rest[-1]
        return ast.CreateTable(
            name.text,
            cols,
            tuple(k.text for k in keys[0]) if keys else (),
            store.text,
            ttl,
            pos=self._pos(meta),
            store_pos=store.pos,
        )

    def column_def(self, meta: Any, children: list[Any]) -> ast.ColumnDef:
        pk = any(isinstance(c, str) and c == "pk" for c in children)
        nn = any(isinstance(c, str) and c == "nn" for c in children)
        return ast.ColumnDef(children[0].text, children[1], pk, nn, self._pos(meta))

    def column_primary(self, meta: Any, children: list[Any]) -> str:
        return "pk"

    def column_not_null(self, meta: Any, children: list[Any]) -> str:
        return "nn"

    def table_key(self, meta: Any, children: list[Any]) -> list[NameTok]:
        return self._items(children)

    # statements
    def insert(self, meta: Any, children: list[Any]) -> ast.Insert:
        items = self._items(children)
        into_table = any(i == "into_table" for i in items if isinstance(i, str))
        name = next(i for i in items if isinstance(i, NameTok))
        select = next(i for i in items if isinstance(i, ast.Select))
        return ast.Insert(name.text, select, into_table, self._pos(meta), name.pos)

    def into_table(self, meta: Any, children: list[Any]) -> str:
        return "into_table"

    def select(self, meta: Any, children: list[Any]) -> ast.Select:
        items = self._items(children)
        sel: tuple[ast.SelectItem, ...] = items[0]
        sources = tuple(i for i in items if isinstance(i, ast.FromItem))
        where = next((i[1] for i in items if isinstance(i, tuple) and i and i[0] == "where"), None)
        group = next((i[1] for i in items if isinstance(i, tuple) and i and i[0] == "group"), ())
        having = next((i[1] for i in items if isinstance(i, tuple) and i and i[0] == "having"), None)
        on_sqls = [i for i in items if isinstance(i, ast.OnSql)]
        if len(on_sqls) > 1:
            raise CplSyntaxError("a statement takes one ON SQL clause", on_sqls[1].pos)
        return ast.Select(
            sel, sources, where, group, having, on_sqls[0] if on_sqls else None, self._pos(meta)
        )

    def select_list(self, meta: Any, children: list[Any]) -> tuple[ast.SelectItem, ...]:
        return tuple(children)

    def select_star(self, meta: Any, children: list[Any]) -> ast.SelectItem:
        return ast.SelectItem(None, None, self._pos(meta))

    def select_expr(self, meta: Any, children: list[Any]) -> ast.SelectItem:
        items = self._items(children)
        alias = items[1].text if len(items) > 1 else None
        return ast.SelectItem(items[0], alias, self._pos(meta))

    def from_item(self, meta: Any, children: list[Any]) -> ast.FromItem:
        items = self._items(children)
        stream: NameTok = items[0]
        alias: str | None = None
        window: str | ast.WindowSpec | None = None
        window_pos = ast.NOPOS
        seen_window = False
        for c in children[1:]:
            if isinstance(c, Token) and c.type == "WINDOW":
                seen_window = True
            elif isinstance(c, NameTok):
                if seen_window:
                    window, window_pos = c.text, c.pos
                else:
                    alias = c.text
            elif isinstance(c, ast.WindowSpec):
                window, window_pos = c, c.pos
        return ast.FromItem(stream.text, alias, window, self._pos(meta), window_pos)

    def where(self, meta: Any, children: list[Any]) -> tuple[str, ast.Expr]:
        return ("where", self._items(children)[0])

    def group_by(self, meta: Any, children: list[Any]) -> tuple[str, tuple[ast.Expr, ...]]:
        return ("group", tuple(self._items(children)))

    def having(self, meta: Any, children: list[Any]) -> tuple[str, ast.Expr]:
        return ("having", self._items(children)[0])

    def on_sql(self, meta: Any, children: list[Any]) -> ast.OnSql:
        outer = self._has(children, "OUTER")
        items = self._items(children)
        names = tuple(tuple(p.text for p in q) for q in items[2:])
        return ast.OnSql(items[0].text, items[1].text, names, outer, self._pos(meta))

    # expressions
    def _fold(self, meta: Any, children: list[Any], op_of: Any) -> ast.Expr:
        out = children[0]
        for i in range(1, len(children), 2):
            right = children[i + 1]
            out = ast.BinaryOp(op_of(children[i]), out, right, _span(_expr_pos(out), _expr_pos(right)))
        return out

    def or_expr(self, meta: Any, children: list[Any]) -> ast.Expr:
        return self._fold(meta, children, lambda t: "or")

    def and_expr(self, meta: Any, children: list[Any]) -> ast.Expr:
        return self._fold(meta, children, lambda t: "and")

    def sum_expr(self, meta: Any, children: list[Any]) -> ast.Expr:
        return self._fold(meta, children, str)

    def product(self, meta: Any, children: list[Any]) -> ast.Expr:
        return self._fold(meta, children, str)

    def not_op(self, meta: Any, children: list[Any]) -> ast.Expr:
        return ast.UnaryOp("not", children[1], self._pos(meta))

    def sign(self, meta: Any, children: list[Any]) -> ast.Expr:
        op = str(children[0])
        if op == "||":
            raise CplSyntaxError("'||' needs a left operand", self._tpos(children[0]))
        arg: ast.Expr = children[1]
        if op == "+":
            return arg
        # Fold a minus into a numeric literal so that -9223372036854775808 is representable.
        if isinstance(arg, ast.Literal) and arg.kind in ("int", "decimal"):
            value = -arg.value if arg.kind == "int" else "-" + str(arg.value)  # type: ignore[operator]
            return ast.Literal(arg.kind, value, self._pos(meta))
        return ast.UnaryOp("-", arg, self._pos(meta))

    def compare(self, meta: Any, children: list[Any]) -> ast.Expr:
        op = str(children[1])
        return ast.BinaryOp("<>" if op == "!=" else op, children[0], children[2], self._pos(meta))

    def is_null(self, meta: Any, children: list[Any]) -> ast.Expr:
        return ast.IsNull(children[0], self._has(children, "NOT"), self._pos(meta))

    def between(self, meta: Any, children: list[Any]) -> ast.Expr:
        items = self._items(children)
        return ast.Between(items[0], items[1], items[2], self._has(children, "NOT"), self._pos(meta))

    def in_list(self, meta: Any, children: list[Any]) -> ast.Expr:
        items = self._items(children)
        return ast.InList(items[0], tuple(items[1:]), self._has(children, "NOT"), self._pos(meta))

    def like(self, meta: Any, children: list[Any]) -> ast.Expr:
        items = self._items(children)
        return ast.Like(items[0], items[1], self._has(children, "NOT"), self._pos(meta))

    def column(self, meta: Any, children: list[Any]) -> ast.Expr:
        parts: tuple[NameTok, ...] = children[0]
        return ast.Name(tuple(p.text for p in parts), _span(parts[0].pos, parts[-1].pos))

    def call(self, meta: Any, children: list[Any]) -> ast.Expr:
        name = str(children[0]).lower()
        star = self._has(children, "STAR")
        distinct = self._has(children, "DISTINCT")
        args = tuple(c for c in children[1:] if not isinstance(c, Token))
        return ast.Call(name, args, star, distinct, self._pos(meta))

    def case(self, meta: Any, children: list[Any]) -> ast.Expr:
        operand: ast.Expr | None = None
        whens: list[tuple[ast.Expr, ast.Expr]] = []
        else_: ast.Expr | None = None
        after_else = False
        for c in children:
            if isinstance(c, Token):
                after_else = after_else or c.type == "ELSE"
            elif isinstance(c, tuple):
                whens.append(c)
            elif after_else:
                else_ = c
            else:
                operand = c
        return ast.Case(operand, tuple(whens), else_, self._pos(meta))

    def when(self, meta: Any, children: list[Any]) -> tuple[ast.Expr, ast.Expr]:
        items = self._items(children)
        return (items[0], items[1])

    def cast(self, meta: Any, children: list[Any]) -> ast.Expr:
        items = self._items(children)
        return ast.Cast(items[0], items[1], self._pos(meta))

    def int_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        value = int(children[0])
        if value > MAX_INT + 1:  # + 1: the magnitude of the most negative bigint
            raise CplSyntaxError("integer literal is out of range for bigint", self._tpos(children[0]))
        return ast.Literal("int", value, self._pos(meta))

    def dec_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        text = str(children[0])
        if len(text) > 64:
            raise CplSyntaxError("numeric literal is too long", self._tpos(children[0]))
        return ast.Literal("decimal", text, self._pos(meta))

    def str_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("string", _unquote(children[0], self._tpos(children[0])), self._pos(meta))

    def ts_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("timestamp", _unquote(children[1], self._tpos(children[1])), self._pos(meta))

    def true_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("bool", True, self._pos(meta))

    def false_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("bool", False, self._pos(meta))

    def null_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("null", None, self._pos(meta))


def _unquote(tok: Token, pos: Pos) -> str:
    """The value of a string token; `pos` is where it is in the script (the token's own position is
    relative to its statement), for the error of an oversized literal."""
    text = str(tok)
    if len(text) > MAX_STRING_CHARS + 2:
        raise CplSyntaxError(f"string literal is longer than {MAX_STRING_CHARS} characters", pos)
    return text[1:-1].replace("''", "'")


# ---- syntax errors --------------------------------------------------------------------------------

_TERMINAL_TEXT = {
    "NAME": "a name",
    "QUOTED_NAME": "a name",
    "STRING": "a string",
    "INT": "a number",
    "DECIMAL_NUMBER": "a number",
    "COMMA": "','",
    "LPAR": "'('",
    "RPAR": "')'",
    "DOT": "'.'",
    "STAR": "'*'",
    "COMP_OP": "a comparison",
    "ADD_OP": "'+', '-' or '||'",
    "MUL_OP": "'/' or '%'",
    "$END": "the end of the statement",
}


def _expected(names: set[str]) -> str:
    texts = sorted({_TERMINAL_TEXT.get(n, n if n in KEYWORD_TOKENS else n.lower()) for n in names})
    if "a name" in texts and len(texts) > 8:
        return ""
    if len(texts) > 8:
        texts = [*texts[:8], "..."]
    return "; expected " + (texts[0] if len(texts) == 1 else "one of " + ", ".join(texts))


def _syntax_error(exc: UnexpectedInput, chunk: Chunk, to_abs: _ToAst) -> CplSyntaxError:
    if isinstance(exc, UnexpectedCharacters):
        line, col = to_abs._abs(exc.line, exc.column)
        pos = Pos(line, col, line, col + 1)
        if exc.char == "'":
            return CplSyntaxError("string literal is not closed: a ' is missing", pos)
        if exc.char == '"':
            return CplSyntaxError('quoted name is not closed: a " is missing', pos)
        return CplSyntaxError(f"unexpected character {exc.char!r}", pos)
    if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        tok = exc.token
        pos = to_abs._tpos(tok)
        msg = f"unexpected {str(tok)!r}{_expected(set(exc.expected))}"
        if tok.type in ("CREATE", "INSERT"):
            msg += " (is a ';' missing before this statement?)"
        return CplSyntaxError(msg, pos)
    expected = set(exc.expected) if isinstance(exc, UnexpectedToken | UnexpectedEOF) else set()
    # End of statement: point just past its last character.
    text = chunk.text.rstrip()
    last_line = text.count("\n") + 1
    last_col = len(text) - (text.rfind("\n") + 1) + 1
    line, col = to_abs._abs(last_line, last_col)
    return CplSyntaxError(f"statement ends too early{_expected(expected)}", Pos(line, col, line, col + 1))


def _tree_too_deep(tree: Tree[Token]) -> Pos | None:
    """Depth-first walk without recursion, so deep nesting cannot overflow Python's stack."""
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, d = stack.pop()
        if d > MAX_TREE_DEPTH:
            meta = node.meta
            return Pos(meta.line, meta.column, meta.end_line, meta.end_column)
        if isinstance(node, Tree):
            stack.extend((c, d + 1) for c in node.children if isinstance(c, Tree))
    return None


def expr_depth(e: ast.Expr) -> int:
    """Depth of an AST expression, computed without recursion."""
    best = 0
    stack: list[tuple[Any, int]] = [(e, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        for child in ast.expr_children(node):
            stack.append((child, d + 1))
    return best


def parse_statement(chunk: Chunk, diags: Diagnostics) -> ast.Statement | None:
    to_ast = _ToAst(chunk)
    try:
        tree = _lark().parse(chunk.text)
    except UnexpectedInput as exc:
        err = _syntax_error(exc, chunk, to_ast)
        diags.error(err.message, err.pos)
        return None
    deep = _tree_too_deep(tree)
    if deep is not None:
        line, col = to_ast._abs(deep.line, deep.col)
        diags.error(
            f"expression is nested too deeply (limit {MAX_TREE_DEPTH} levels)", Pos(line, col, line, col + 1)
        )
        return None
    try:
        stmt: ast.Statement = to_ast.transform(tree)
    except VisitError as exc:  # lark wraps errors raised inside transformer callbacks
        orig = exc.orig_exc
        if isinstance(orig, CplSyntaxError):
            diags.error(orig.message, orig.pos)
            return None
        raise orig from None
    return stmt


def parse(source: str, diags: Diagnostics) -> ast.Script:
    """Parse a whole script; syntax errors go to `diags` and their statements are left out."""
    if len(source) > MAX_SCRIPT_CHARS:
        diags.error(f"script is larger than {MAX_SCRIPT_CHARS} characters")
        return ast.Script(())
    statements: list[ast.Statement] = []
    for count, chunk in enumerate(split_statements(source)):
        if count >= MAX_STATEMENTS:
            diags.error(
                f"script has more than {MAX_STATEMENTS} statements",
                Pos(chunk.line, chunk.col, chunk.line, chunk.col + 1),
            )
            break
        if _blank(chunk.text):
            continue
        stmt = parse_statement(chunk, diags)
        if stmt is not None:
            statements.append(stmt)
    return ast.Script(tuple(statements))
