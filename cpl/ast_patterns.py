"""The pattern rules of the tree → AST transformer: FROM PATTERN / FROM SEQUENCE (steps, counts and
quantifiers, absences, AND/OR, EVERY, groups, WITHIN, PARTITION BY) and indexed access to a counted
step's events (`e2[0].f`, `e2[last].f`, `e2[last - 1].f`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lark import Token, v_args

from cpl import syntax_tree as ast
from cpl.ast_builder import NameTok, span
from cpl.ast_expressions import ExpressionRules
from cpl.errors import CplSyntaxError
from cpl.limits import MAX_INT

Element = ast.PatternElement

_COUNT_FORMS = "a count is written <n>, <n:m>, <n:> or <:m>"
_INDEX_FORMS = "expected a number, last or last - n between the brackets"
# What an index may be, one letter a part: n a number, l the name last, - a minus.
_INDEX_SHAPES = ("n", "l", "l-n")


def _fitting_parts(shape: str) -> int:
    """How many parts of an index's shape begin some index that is allowed."""
    return max(i for i in range(len(shape) + 1) if any(s.startswith(shape[:i]) for s in _INDEX_SHAPES))


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
        # the parenthesised group's place includes its parentheses, where an error about it points
        group: ast.PatternGroup = self._items(children)[0]
        return replace(group, pos=self._pos(meta))

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
        # `<` and `>` are COMP_OP tokens (the lexer cannot tell a count from a comparison), so the
        # grammar takes any comparison there and this says which one is wrong
        ops = [c for c in children if isinstance(c, Token) and c.type == "COMP_OP"]
        bad = ops[0] if str(ops[0]) != "<" else ops[-1] if str(ops[-1]) != ">" else None
        if bad is not None:
            raise CplSyntaxError(f"unexpected {str(bad)!r}; {_COUNT_FORMS}", self._tpos(bad))

    def _number(self, tok: Token, what: str) -> int:
        value = int(tok)
        if value > MAX_INT:
            raise CplSyntaxError(f"{what} is out of range for bigint", self._tpos(tok))
        return value

    def pattern_range(self, meta: Any, children: list[Any]) -> tuple[str, tuple[int, int | None]]:
        self._brackets(children)
        parts = [c for c in children if isinstance(c, Token) and c.type in ("INT", "COLON")]
        colon = next(i for i, c in enumerate(parts) if c.type == "COLON")
        if len(parts) == 1:  # <:> bounds nothing
            raise CplSyntaxError(f"a count needs a number; {_COUNT_FORMS}", self._pos(meta))
        lo = self._number(parts[0], "a count") if colon == 1 else 0
        hi = self._number(parts[-1], "a count") if colon < len(parts) - 1 else None
        return ("count", (lo, hi))

    def pattern_exact(self, meta: Any, children: list[Any]) -> tuple[str, tuple[int, int]]:
        self._brackets(children)
        n = self._number(next(c for c in children if isinstance(c, Token) and c.type == "INT"), "a count")
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
        """(index, None) for `e[n]`, (None, n) for `e[last - n]`; anything else in the brackets is
        an error at the first part that does not fit, saying what an index may be."""
        shape = "".join(self._index_letter(c) for c in children)
        if shape not in _INDEX_SHAPES:
            fits = _fitting_parts(shape)
            if fits == len(shape):  # `last -` and nothing after it
                raise CplSyntaxError(
                    f"'last -' needs a number; {_INDEX_FORMS}", self._index_pos(children[-1])
                )
            bad = children[fits]
            text = bad.text if isinstance(bad, NameTok) else str(bad)
            raise CplSyntaxError(f"unexpected {text!r}; {_INDEX_FORMS}", self._index_pos(bad))
        if shape == "n":
            return (self._number(children[0], "an index"), None)
        return (None, self._number(children[2], "an index") if shape == "l-n" else 0)

    @staticmethod
    def _index_letter(part: Token | NameTok) -> str:
        if isinstance(part, NameTok):
            return "l" if part.text.lower() == "last" else "?"
        if part.type == "INT":
            return "n"
        return "-" if str(part) == "-" else "?"

    def _index_pos(self, part: Token | NameTok) -> ast.Pos:
        return part.pos if isinstance(part, NameTok) else self._tpos(part)
