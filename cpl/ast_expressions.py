"""The expression rules of the tree → AST transformer: operators, predicates, calls, CASE, CAST
and literals (with the checks of their limits)."""

from __future__ import annotations

from typing import Any

from lark import Token, v_args

from cpl import syntax_tree as ast
from cpl.ast_builder import AstBuilder, NameTok, expr_pos, span, unquote
from cpl.errors import CplSyntaxError
from cpl.limits import MAX_INT


@v_args(meta=True)
class ExpressionRules(AstBuilder):
    # binary operators, left-associative
    def _fold(self, meta: Any, children: list[Any], op_of: Any) -> ast.Expr:
        out = children[0]
        for i in range(1, len(children), 2):
            right = children[i + 1]
            out = ast.BinaryOp(op_of(children[i]), out, right, span(expr_pos(out), expr_pos(right)))
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
        return ast.Name(tuple(p.text for p in parts), span(parts[0].pos, parts[-1].pos))

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
        return ast.Literal("string", unquote(children[0], self._tpos(children[0])), self._pos(meta))

    def ts_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("timestamp", unquote(children[1], self._tpos(children[1])), self._pos(meta))

    def true_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("bool", True, self._pos(meta))

    def false_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("bool", False, self._pos(meta))

    def null_lit(self, meta: Any, children: list[Token]) -> ast.Expr:
        return ast.Literal("null", None, self._pos(meta))
