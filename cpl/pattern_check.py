"""Type checking inside a pattern: a step's condition over the tested event and the values of the
partial match (`e1.price`, `e2[last].price`), and the SELECT and WHERE over the match row
(`e1.symbol`, `e2[0].ts`, `count(e2.idreceiver)`, `match_time()`).

`PatternChecker` resolves such references to `operators.patterns.Ref`s, collected in the order met,
each a column after the event's fields (conditions) or from the start (the match row).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cpl import syntax_tree as ast
from cpl.aggregate_check import aggregate_type, contains_aggregate
from cpl.errors import TypeCheckError
from cpl.scope import Scope
from cpl.typecheck import Checker
from operators import expr as ir
from operators import patterns as pt
from operators.datatypes import T_TIMESTAMP, Schema
from operators.graph import MATCH_TIME


@dataclass(frozen=True)
class Alias:
    """A step's alias: its slot, its stream's schema, whether it collects several events, and the
    state that binds it."""

    name: str
    slot: int
    schema: Schema
    counted: bool
    state: int


class PatternChecker(Checker):
    """Checks expressions of a pattern (see the module docstring). `usable`: the aliases it may read;
    `own`: the alias of the step whose condition it is (`e2[last]` in e2's own condition); `width`:
    the columns before the first ref (the event's fields; 0 for the match row)."""

    def __init__(
        self,
        scope: Scope,
        aliases: dict[str, Alias],
        usable: set[str],
        own: str | None,
        width: int,
        where: str,
    ) -> None:
        super().__init__(scope)
        self.aliases = aliases
        self.usable = usable
        self.own = own
        self.width = width
        self.where = where  # "a condition" or "the SELECT" ...: for messages
        self.refs: list[pt.Ref] = []

    def _alias(self, name: str, pos: ast.Pos) -> Alias:
        a = self.aliases[name.lower()]
        if a.name.lower() not in self.usable and a.name.lower() != (self.own or "").lower():
            raise TypeCheckError(
                f"'{a.name}' is bound by a later step: {self.where} may read the aliases of earlier steps",
                pos,
            )
        return a

    def _ref(self, ref: pt.Ref) -> ir.Col:
        if ref not in self.refs:
            self.refs.append(ref)
        a = next(x for x in self.aliases.values() if x.slot == ref.slot)
        index = self.width + self.refs.index(ref)
        if ref.agg is not None:
            return ir.Col(ref.type, index, ref.to_cpl(a.name))
        shown = ref.to_cpl(a.name)  # `e2[last].price`: the qualifier is what precedes the field
        return ir.Col(ref.type, index, ref.name, 0, shown[: -len(ref.name) - 1])

    def _field(self, a: Alias, name: str, pos: ast.Pos) -> tuple[int, str]:
        f = a.schema.get(name)
        if f is None:
            raise TypeCheckError(
                f"'{a.name}' has no field '{name}'; its fields: {', '.join(a.schema.names)}", pos
            )
        return a.schema.position(f.name), f.name

    def check(self, e: ast.Expr) -> ir.Expr:
        if isinstance(e, ast.Name) and len(e.parts) == 2 and self._is_ref(e.parts[0]):
            a = self._alias(e.parts[0], e.pos)
            if a.counted:
                raise TypeCheckError(
                    f"'{a.name}' collects several events: read one of them (e.g. {a.name}[0].{e.parts[1]}, "
                    f"{a.name}[last].{e.parts[1]}) or an aggregate over them (count({a.name}.{e.parts[1]}))",
                    e.pos,
                )
            field, name = self._field(a, e.parts[1], e.pos)
            return self._ref(pt.Ref(a.slot, field, name, a.schema.fields[field].type))
        if isinstance(e, ast.Indexed):
            return self._indexed(e)
        if isinstance(e, ast.Call) and e.name == "match_time":
            if self.width or e.args or e.star:
                raise TypeCheckError(
                    "match_time() takes no arguments and is read in SELECT or WHERE only", e.pos
                )
            return ir.Col(T_TIMESTAMP, -1, MATCH_TIME)
        if isinstance(e, ast.Call) and e.name in ir.AGGREGATE_FUNCTIONS:
            return self._aggregate(e)
        return self._check(e)

    def _is_ref(self, qualifier: str) -> bool:
        """`x.f` reads the partial when x is an alias other than the tested event's own."""
        q = qualifier.lower()
        if q not in self.aliases:
            return False
        return not (self.own is not None and q == self.own.lower() and not self.aliases[q].counted)

    def _indexed(self, e: ast.Indexed) -> ir.Expr:
        if e.alias.lower() not in self.aliases:
            raise TypeCheckError(f"unknown alias '{e.alias}'; the aliases here: {self._names()}", e.pos)
        a = self._alias(e.alias, e.pos)
        if self.own is not None and a.name.lower() == self.own.lower() and not a.counted:
            raise TypeCheckError(
                f"'{a.name}' takes one event: its condition reads that event's fields", e.pos
            )
        field, name = self._field(a, e.field, e.pos)
        t = a.schema.fields[field].type
        return self._ref(pt.Ref(a.slot, field, name, t, index=e.index, from_last=e.from_last))

    def _aggregate(self, e: ast.Call) -> ir.Expr:
        arg = e.args[0] if len(e.args) == 1 and not e.star and not e.distinct else None
        if not (isinstance(arg, ast.Name) and len(arg.parts) == 2 and arg.parts[0].lower() in self.aliases):
            raise TypeCheckError(
                f"{e.name}() in a pattern aggregates the events a counted step collected: write "
                f"{e.name}(alias.field), e.g. {e.name}(e2.price) (Siddhi's running count() has no CPL form)",
                e.pos,
            )
        if contains_aggregate(arg):
            raise TypeCheckError("aggregate functions cannot be nested", e.pos)
        a = self._alias(arg.parts[0], arg.pos)
        field, name = self._field(a, arg.parts[1], arg.pos)
        t = aggregate_type(e.name, a.schema.fields[field].type, e.pos)
        return self._ref(pt.Ref(a.slot, field, name, t, agg=e.name))

    def _name(self, e: ast.Name) -> ir.Expr:
        if self.width == 0:  # the match row: every value is read through an alias
            raise TypeCheckError(
                f"name the step '{'.'.join(e.parts)}' comes from, e.g. {self._example()}.{e.parts[-1]} "
                f"(the aliases here: {self._names()})",
                e.pos,
            )
        return super()._name(e)

    def _names(self) -> str:
        return ", ".join(a.name for a in self.aliases.values()) or "none"

    def _example(self) -> str:
        return next(iter(self.aliases.values())).name if self.aliases else "e1"


def place_match_time(e: ir.Expr, row_width: int) -> ir.Expr:
    """Point match_time() (the sentinel index -1) at its place in the match row, after the refs."""
    return ir.replace_cols(e, lambda c: replace(c, index=row_width) if c.index == -1 else None)
