"""Limits that keep a hostile or broken script from exhausting the compiler, and the depth
measures that enforce the two nesting limits without recursing themselves."""

from __future__ import annotations

from typing import Any

from lark import Token, Tree

from cpl import syntax_tree as ast
from cpl.syntax_tree import Pos

MAX_SCRIPT_CHARS = 2_000_000
MAX_STATEMENTS = 20_000
MAX_TREE_DEPTH = 200  # parse-tree levels; lark transforms recursively, so keep well under the stack limit
MAX_EXPR_DEPTH = 100  # levels of an expression after parsing
MAX_STRING_CHARS = 65_536
MAX_INT = 2**63 - 1


def tree_too_deep(tree: Tree[Token]) -> Pos | None:
    """Where a parse tree is deeper than MAX_TREE_DEPTH (relative to its statement), else None.

    Depth-first walk without recursion, so deep nesting cannot overflow Python's stack."""
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
