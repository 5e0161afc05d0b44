"""The packaged LALR grammar (`cpl.lark`) and what the rest of the compiler needs to know about its
tokens: which are keywords, and where a token or a tree node is in the script."""

from __future__ import annotations

import hashlib
import os
import sys
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import lark
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
    """The LALR parser of `cpl.lark`. Building its tables takes ~0.4 s, which every process that
    compiles a script paid (each `cep` command, the service's start); lark keeps them in a cache
    file, which loads in ~0.05 s. Where none can be written, the parser is built as before."""
    return built_parser(cached=True)


def built_parser(cached: bool) -> Lark:
    """The parser of `cpl.lark`, its tables from the cache file when `cached` (a parser loaded from
    it has its tables, not the grammar's analysis: a test that reads the analysis builds one)."""
    grammar = resources.files("cpl").joinpath("cpl.lark").read_text(encoding="utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="basic",
        propagate_positions=True,
        maybe_placeholders=False,
        cache=(_cache_file(grammar) if cached else None) or False,
    )


def _cache_file(grammar: str) -> str | None:
    """The user's own cache file for this grammar's tables (one per grammar, lark version and
    Python version: lark checks them when it loads it), under $XDG_CACHE_HOME/paascep/cpl (by
    default ~/.cache/paascep/cpl), beside the JVM's archive (deployer.spark.run.jvm_archive
    `cache_dir`, which cpl cannot import). Not the system's temp directory, which lark would
    choose: the file is a pickle, and anyone can put a file there. None when that directory cannot
    be made."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    directory = Path(base) / "paascep" / "cpl"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    key = f"{grammar}|{lark.__version__}|{sys.version_info[:2]}".encode()
    return str(directory / f"cpl-parser-{hashlib.sha256(key).hexdigest()[:20]}.lark")


def token_pos(chunk: Chunk, tok: Token) -> Pos:
    """Where a token of `chunk` is in the script."""
    return chunk.script_span(tok.line or 1, tok.column or 1, tok.end_line or 1, tok.end_column or 1)


def meta_pos(chunk: Chunk, meta: Any) -> Pos:
    """Where a tree node of `chunk` is in the script; NOPOS for a node that matched no text."""
    if getattr(meta, "empty", False) or not hasattr(meta, "line"):
        return ast.NOPOS
    return chunk.script_span(meta.line, meta.column, meta.end_line, meta.end_column)
