"""Text → AST. Splits the script into statements (`cpl.splitter`), parses each with the packaged
LALR grammar (`cpl.grammar`) and turns lark's trees into `cpl.syntax_tree` nodes carrying absolute
line/column positions (`cpl.ast_statements.ToAst`).

Parsing one statement at a time gives error recovery for free: a syntax error is reported and the
next statement is parsed as usual, so a script with several errors reports all of them.
"""

from __future__ import annotations

from lark.exceptions import UnexpectedInput, VisitError

from cpl import syntax_tree as ast
from cpl.ast_statements import ToAst
from cpl.errors import CplSyntaxError, Diagnostics
from cpl.grammar import lark_parser
from cpl.limits import MAX_SCRIPT_CHARS, MAX_STATEMENTS, MAX_TREE_DEPTH, tree_too_deep
from cpl.splitter import Chunk, is_blank, split_statements
from cpl.syntax_errors import syntax_error
from cpl.syntax_tree import Pos


def parse_statement(chunk: Chunk, diags: Diagnostics) -> ast.Statement | None:
    try:
        tree = lark_parser().parse(chunk.text)
    except UnexpectedInput as exc:
        err = syntax_error(exc, chunk)
        diags.error(err.message, err.pos)
        return None
    deep = tree_too_deep(tree)
    if deep is not None:
        diags.error(
            f"expression is nested too deeply (limit {MAX_TREE_DEPTH} levels)",
            chunk.script_point(deep.line, deep.col),
        )
        return None
    try:
        stmt: ast.Statement = ToAst(chunk).transform(tree)
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
        if is_blank(chunk.text):
            continue
        stmt = parse_statement(chunk, diags)
        if stmt is not None:
            statements.append(stmt)
    return ast.Script(tuple(statements))
