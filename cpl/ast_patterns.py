"""The pattern rules of the tree → AST transformer: FROM PATTERN / FROM SEQUENCE (steps, counts and
quantifiers, absences, AND/OR, EVERY, groups, WITHIN, PARTITION BY) and indexed access to a counted
step's events (`e2[0].f`, `e2[last].f`, `e2[last - 1].f`)."""

from __future__ import annotations

from typing import Any

from lark import Token, v_args

from cpl import syntax_tree as ast
from cpl.ast_builder import NameTok, span
from cpl.ast_expressions import ExpressionRules
from cpl.errors import CplSyntaxError

Element = ast.PatternElement


@v_args(meta=True)
class PatternRules(ExpressionRules):
    def pattern_from(self, meta: Any, children: list[Any]) -> ast.PatternFrom:
        kind = "pattern" if self._has(children, "PATTERN") else "sequence"
        body = next(c for c in children if isinstance(c, ast.PatternGroup))
        within = next((c[1] for c in children if isinstance(c, tuple) and c[0] == "within"), None)
        part = next((c[1] for c in children if isinstance(c, tuple) and c[0] == "partition"), ())
        return ast.PatternFrom(kind, body, within, part, self._pos(meta))

    def pattern_within(self, meta: Any, children: list[Any]) -> tuple[str, ast.Duration]:
        return ("within", self._items(children)[0])

    def pattern_partition(self, meta: Any, children: list[Any]) -> tuple[str, tuple[ast.Name, ...]]:
        names = []
        for parts in self._items(children):
            names.append(ast.Name(tuple(p.text for p in parts), span(parts[0].pos, parts[-1].pos)))
        return ("partition", tuple(names))

    def pattern_body(self, meta: Any, children: list[Any]) -> ast.PatternGroup:
        items = tuple(c for c in children if not isinstance(c, tuple))
        seps = [c for c in children if isinstance(c, tuple)]
        return ast.PatternGroup(
            items, tuple(s[0] for s in seps), self._pos(meta), separator_pos=tuple(s[1] for s in seps)
        )

    def sep_arrow(self, meta: Any, children: list[Any]) -> tuple[str, ast.Pos]:
        return ("->", self._pos(meta))

    def sep_comma(self, meta: Any, children: list[Any]) -> tuple[str, ast.Pos]:
        return (",", self._pos(meta))

    def pattern_every(self, meta: Any, children: list[Any]) -> ast.PatternEvery:
        return ast.PatternEvery(self._items(children)[0], self._pos(meta))

    def pattern_group(self, meta: Any, children: list[Any]) -> ast.PatternGroup:
        group: ast.PatternGroup = self._items(children)[0]
        return group

    def pattern_and(self, meta: Any, children: list[Any]) -> Element:
        items = self._items(children)
        if len(items) == 1:
            only: Element = items[0]
            return only
        return ast.PatternLogical("and", items[0], items[1], self._pos(meta))

    def pattern_or(self, meta: Any, children: list[Any]) -> ast.PatternLogical:
        items = self._items(children)
        return ast.PatternLogical("or", items[0], items[1], self._pos(meta))

    def pattern_step(self, meta: Any, children: list[Any]) -> ast.PatternStep:
        alias: NameTok = children[0]
        op: Token = children[1]
        if str(op) != "=":
            raise CplSyntaxError(f"unexpected {str(op)!r}; a step is written alias=stream", self._tpos(op))
        stream: NameTok = children[2]
        cond = next((c[1] for c in children[3:] if isinstance(c, tuple) and c[0] == "cond"), None)
        count = next((c[1] for c in children[3:] if isinstance(c, tuple) and c[0] == "count"), None)
        quant = next((c[1] for c in children[3:] if isinstance(c, tuple) and c[0] == "quant"), None)
        return ast.PatternStep(
            alias.text, stream.text, cond, count, quant, self._pos(meta), alias.pos, stream.pos
        )

    def pattern_absence(self, meta: Any, children: list[Any]) -> ast.PatternAbsence:
        items = self._items(children)
        stream: NameTok = items[0]
        cond = next((c[1] for c in items if isinstance(c, tuple) and c[0] == "cond"), None)
        wait = next((c for c in items if isinstance(c, ast.Duration)), None)
        return ast.PatternAbsence(stream.text, cond, wait, self._pos(meta), stream.pos)

    def pattern_condition(self, meta: Any, children: list[Any]) -> tuple[str, ast.Expr]:
        return ("cond", self._items(children)[0])

    def _brackets(self, children: list[Any]) -> None:
        ops = [c for c in children if isinstance(c, Token) and c.type == "COMP_OP"]
        if [str(o) for o in ops] != ["<", ">"]:
            bad = next((o for o in ops if str(o) not in "<>"), ops[0])
            raise CplSyntaxError(
                f"unexpected {str(bad)!r}; a count is written <n>, <n:m>, <n:> or <:m>", self._tpos(bad)
            )

    def pattern_range(self, meta: Any, children: list[Any]) -> tuple[str, tuple[int, int | None]]:
        self._brackets(children)
        before = [c for c in children if isinstance(c, Token) and c.type in ("INT", "COLON")]
        lo = int(before[0]) if before[0].type == "INT" else 0
        after = before[before.index(next(c for c in before if c.type == "COLON")) + 1 :]
        hi = int(after[0]) if after else None
        return ("count", (lo, hi))

    def pattern_exact(self, meta: Any, children: list[Any]) -> tuple[str, tuple[int, int]]:
        self._brackets(children)
        n = int(next(c for c in children if isinstance(c, Token) and c.type == "INT"))
        return ("count", (n, n))

    def pattern_star(self, meta: Any, children: list[Any]) -> tuple[str, str]:
        return ("quant", "*")

    def pattern_plus(self, meta: Any, children: list[Any]) -> tuple[str, str]:
        op = children[0]
        if str(op) != "+":
            raise CplSyntaxError(
                f"unexpected {str(op)!r} after a step; a quantifier is +, * or ?", self._tpos(op)
            )
        return ("quant", "+")

    def pattern_optional(self, meta: Any, children: list[Any]) -> tuple[str, str]:
        return ("quant", "?")

    def indexed(self, meta: Any, children: list[Any]) -> ast.Expr:
        alias: NameTok = children[0]
        index: tuple[int | None, int | None] = children[1]
        field: NameTok = children[2]
        return ast.Indexed(alias.text, field.text, index[0], index[1], self._pos(meta))

    def pattern_index(self, meta: Any, children: list[Any]) -> tuple[int | None, int | None]:
        first = children[0]
        if isinstance(first, Token) and first.type == "INT":
            return (int(first), None)
        name: NameTok = first
        wrong = "expected a number, last or last - n between the brackets"
        if name.text.lower() != "last":
            raise CplSyntaxError(f"unexpected {name.text!r}; {wrong}", name.pos)
        if len(children) == 1:
            return (None, 0)
        op: Token = children[1]
        if str(op) != "-":
            raise CplSyntaxError(f"unexpected {str(op)!r}; {wrong}", self._tpos(op))
        return (None, int(children[2]))
