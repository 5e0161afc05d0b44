"""The statement rules of the tree → AST transformer: the CREATE declarations and INSERT ... SELECT.
`ToAst` is the complete transformer, these rules on top of the expression rules."""

from __future__ import annotations

from typing import Any

from lark import Token, v_args

from cpl import syntax_tree as ast
from cpl.ast_builder import NameTok, span, unquote
from cpl.ast_patterns import PatternRules
from cpl.errors import CplSyntaxError

_OUTPUT_KINDS = ("ALL", "FIRST", "LAST", "SNAPSHOT")


@v_args(meta=True)
class ToAst(PatternRules):
    """A statement's lark tree → its `ast` node, with positions made absolute in the script."""

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
            unquote(text_tok, self._tpos(text_tok)),
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

    def create_trigger(self, meta: Any, children: list[Any]) -> ast.CreateTrigger:
        name: NameTok = children[2]
        at = children[4:]
        pos = self._pos(meta)
        if self._has(at, "START"):
            return ast.CreateTrigger(name.text, pos=pos, name_pos=name.pos, at_pos=self._tpos(at[0]))
        if isinstance(at[0], Token) and at[0].type == "STRING":
            where = self._tpos(at[0])
            return ast.CreateTrigger(
                name.text, cron=unquote(at[0], where), pos=pos, name_pos=name.pos, at_pos=where
            )
        sign = next((c for c in at if isinstance(c, Token) and c.type == "ADD_OP"), None)
        amount = next(c for c in at if isinstance(c, Token) and c.type == "INT")
        unit: NameTok = at[-1]
        where = span(self._tpos(sign) if sign is not None else self._tpos(amount), unit.pos)
        if sign is not None and str(sign) != "+":
            raise CplSyntaxError(f"AT EVERY {sign}{amount} {unit.text}: the period must be positive", where)
        every = ast.Duration(int(amount), unit.text.lower(), where)
        return ast.CreateTrigger(name.text, every=every, pos=pos, name_pos=name.pos, at_pos=where)

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
        pattern = next((i for i in items if isinstance(i, ast.PatternFrom)), None)
        output = next((i for i in items if isinstance(i, ast.OutputRate)), None)
        on_sql = on_sqls[0] if on_sqls else None
        return ast.Select(sel, sources, where, group, having, on_sql, self._pos(meta), pattern, output)

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

    def output_rate(self, meta: Any, children: list[Any]) -> ast.OutputRate:
        kinds = [c for c in children if isinstance(c, Token) and c.type in _OUTPUT_KINDS]
        if len(kinds) > 1:
            words = " ".join(str(k).upper() for k in kinds)
            hint = "SNAPSHOT takes no FIRST or LAST" if any(k.type == "SNAPSHOT" for k in kinds) else ""
            raise CplSyntaxError(
                f"OUTPUT {words}: write one of ALL, FIRST, LAST or SNAPSHOT" + (f" ({hint})" if hint else ""),
                span(self._tpos(kinds[0]), self._tpos(kinds[-1])),
            )
        kind = kinds[0].type.lower() if kinds else "all"
        sign = next((c for c in children if isinstance(c, Token) and c.type == "ADD_OP"), None)
        amount = next(c for c in children if isinstance(c, Token) and c.type == "INT")
        unit: NameTok = children[-1]
        where = span(self._tpos(sign) if sign is not None else self._tpos(amount), unit.pos)
        if sign is not None and str(sign) != "+":
            raise CplSyntaxError(
                f"OUTPUT EVERY {sign}{amount} {unit.text}: the count or duration must be positive", where
            )
        pos = self._pos(meta)
        if unit.text.lower() in ("events", "event"):
            if int(amount) == 0:
                raise CplSyntaxError("OUTPUT EVERY 0 EVENTS: the count must be at least 1", where)
            return ast.OutputRate(kind, events=int(amount), pos=pos, every_pos=where)
        every = ast.Duration(int(amount), unit.text.lower(), where)
        return ast.OutputRate(kind, every=every, pos=pos, every_pos=where)

    def on_sql(self, meta: Any, children: list[Any]) -> ast.OnSql:
        outer = self._has(children, "OUTER")
        items = self._items(children)
        names = tuple(tuple(p.text for p in q) for q in items[2:])
        return ast.OnSql(items[0].text, items[1].text, names, outer, self._pos(meta))
