"""The packaged LALR grammar (`cpl.lark`) and what the rest of the compiler needs to know about its
tokens: which are keywords, and where a token or a tree node is in the script."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from lark import Lark, Token

from cpl import syntax_tree as ast
from cpl.splitter import Chunk
from cpl.syntax_tree import Pos

KEYWORD_TOKENS = frozenset(
    """CREATE STREAMSCHEMA WITH BY WATERMARK AS TUPLE TIME BATCH SIZE ADVANCE START STOP DATASTORE TYPE
    SQLQUERY ON CACHE ROWS TTL TABLE PRIMARY KEY IN INSERT INTO SELECT FROM WHERE GROUP HAVING SQL
    RETURNS OUTER AND OR NOT IS NULL BETWEEN LIKE CASE WHEN THEN ELSE END CAST WINDOW DISTINCT
    TIMESTAMP PATTERN SEQUENCE EVERY WITHIN PARTITION FOR OUTPUT ALL FIRST LAST SNAPSHOT""".split()
)


@cache
def lark_parser() -> Lark:
    grammar = resources.files("cpl").joinpath("cpl.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="basic", propagate_positions=True, maybe_placeholders=False)


def token_pos(chunk: Chunk, tok: Token) -> Pos:
    """Where a token of `chunk` is in the script."""
    return chunk.script_span(tok.line or 1, tok.column or 1, tok.end_line or 1, tok.end_column or 1)


def meta_pos(chunk: Chunk, meta: Any) -> Pos:
    """Where a tree node of `chunk` is in the script; NOPOS for a node that matched no text."""
    if getattr(meta, "empty", False) or not hasattr(meta, "line"):
        return ast.NOPOS
    return chunk.script_span(meta.line, meta.column, meta.end_line, meta.end_column)
