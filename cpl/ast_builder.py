"""The base of the lark tree → AST transformer: positions in the script, token helpers, and the
rules for the pieces both statements and expressions use (names, type names, durations).

Each rule method is named after its grammar rule and receives the node's `meta` (its position in
the statement) and its already transformed children.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lark import Token, Transformer, v_args

from cpl import syntax_tree as ast
from cpl.errors import CplSyntaxError
from cpl.grammar import KEYWORD_TOKENS, meta_pos, token_pos
from cpl.limits import MAX_STRING_CHARS
from cpl.splitter import Chunk
from cpl.syntax_tree import Pos


@dataclass(frozen=True)
class NameTok:
    text: str
    pos: Pos


def span(a: Pos, b: Pos) -> Pos:
    return Pos(a.line, a.col, b.end_line, b.end_col)


def expr_pos(e: Any) -> Pos:
    return getattr(e, "pos", ast.NOPOS)


def unquote(tok: Token, pos: Pos) -> str:
    """The value of a string token; `pos` is where it is in the script (the token's own position is
    relative to its statement), for the error of an oversized literal."""
    text = str(tok)
    if len(text) > MAX_STRING_CHARS + 2:
        raise CplSyntaxError(f"string literal is longer than {MAX_STRING_CHARS} characters", pos)
    return text[1:-1].replace("''", "'")


@v_args(meta=True)
class AstBuilder(Transformer[Token, Any]):
    def __init__(self, chunk: Chunk):
        super().__init__()
        self._chunk = chunk

    # positions
    def _pos(self, meta: Any) -> Pos:
        return meta_pos(self._chunk, meta)

    def _tpos(self, tok: Token) -> Pos:
        return token_pos(self._chunk, tok)

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
