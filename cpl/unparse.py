"""AST → CPL text. `parse(unparse(tree))` gives back an equal tree (tested with hypothesis).

Every compound expression is parenthesised, so the text never depends on operator precedence, and
every name that is not a plain identifier, or is a keyword, is double-quoted.
"""

from __future__ import annotations

import re

from cpl import syntax_tree as ast
from cpl.grammar import KEYWORD_TOKENS

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = {k.lower() for k in KEYWORD_TOKENS} | {"true", "false"}


def name(n: str) -> str:
    if _PLAIN.match(n) and n.lower() not in _RESERVED:
        return n
    return '"' + n.replace('"', '""') + '"'


def string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def expr(e: ast.Expr) -> str:
    if isinstance(e, ast.Literal):
        if e.kind == "null":
            return "NULL"
        if e.kind == "bool":
            return "TRUE" if e.value else "FALSE"
        if e.kind == "string":
            return string(str(e.value))
        if e.kind == "timestamp":
            return "TIMESTAMP " + string(str(e.value))
        return str(e.value)
    if isinstance(e, ast.Name):
        return ".".join(name(p) for p in e.parts)
    if isinstance(e, ast.UnaryOp):
        return f"(NOT {expr(e.arg)})" if e.op == "not" else f"({e.op}{expr(e.arg)})"
    if isinstance(e, ast.BinaryOp):
        op = e.op.upper() if e.op in ("and", "or") else e.op
        return f"({expr(e.left)} {op} {expr(e.right)})"
    if isinstance(e, ast.IsNull):
        return f"({expr(e.arg)} IS {'NOT ' if e.negated else ''}NULL)"
    if isinstance(e, ast.Between):
        neg = "NOT " if e.negated else ""
        return f"({expr(e.arg)} {neg}BETWEEN {_atom(e.low)} AND {_atom(e.high)})"
    if isinstance(e, ast.InList):
        neg = "NOT " if e.negated else ""
        return f"({expr(e.arg)} {neg}IN ({', '.join(expr(i) for i in e.items)}))"
    if isinstance(e, ast.Like):
        return f"({expr(e.arg)} {'NOT ' if e.negated else ''}LIKE {_atom(e.pattern)})"
    if isinstance(e, ast.Case):
        parts = ["CASE"]
        if e.operand is not None:
            parts.append(expr(e.operand))
        for c, v in e.whens:
            parts += ["WHEN", expr(c), "THEN", expr(v)]
        if e.else_ is not None:
            parts += ["ELSE", expr(e.else_)]
        parts.append("END")
        return " ".join(parts)
    if isinstance(e, ast.Cast):
        return f"CAST({expr(e.arg)} AS {type_name(e.to)})"
    if isinstance(e, ast.Indexed):
        last = "last" if not e.from_last else f"last - {e.from_last}"
        at = str(e.index) if e.index is not None else last
        return f"{name(e.alias)}[{at}].{name(e.field)}"
    if isinstance(e, ast.Call):
        if e.star:
            return f"{e.name}(*)"
        args = ", ".join(expr(a) for a in e.args)
        return f"{e.name}({'DISTINCT ' if e.distinct else ''}{args})"
    raise TypeError(f"cannot unparse {type(e).__name__}")


def _atom(e: ast.Expr) -> str:
    text = expr(e)
    return text if text.startswith("(") else f"({text})"


def type_name(t: ast.TypeName) -> str:
    return t.name + (f"({', '.join(str(a) for a in t.args)})" if t.args else "")


def duration(d: ast.Duration) -> str:
    return f"{d.amount} {d.unit.upper()}"


def window(w: ast.WindowSpec) -> str:
    if w.kind == "batch":
        assert w.start is not None and w.stop is not None
        return f"BATCH START {expr(w.start)} STOP {expr(w.stop)}"

    def amount(v: int | ast.Duration | None) -> str:
        return duration(v) if isinstance(v, ast.Duration) else str(v)

    text = f"{w.kind.upper()} SIZE {amount(w.size)}"
    return text + (f" ADVANCE {amount(w.advance)}" if w.advance is not None else "")


def select(s: ast.Select) -> str:
    items = ", ".join(
        "*" if i.expr is None else expr(i.expr) + (f" AS {name(i.alias)}" if i.alias else "") for i in s.items
    )
    sources = [pattern(s.pattern)] if s.pattern is not None else []
    for f in s.sources:
        text = name(f.stream) + (f" AS {name(f.alias)}" if f.alias else "")
        if isinstance(f.window, str):
            text += f" WINDOW {name(f.window)}"
        elif f.window is not None:
            text += f" WINDOW {window(f.window)}"
        sources.append(text)
    out = f"SELECT {items} FROM {', '.join(sources)}"
    if s.where is not None:
        out += f" WHERE {expr(s.where)}"
    if s.group_by:
        out += " GROUP BY " + ", ".join(expr(g) for g in s.group_by)
    if s.having is not None:
        out += f" HAVING {expr(s.having)}"
    if s.on_sql is not None:
        o = s.on_sql
        names = ", ".join(".".join(name(p) for p in n) for n in o.names)
        out += f" ON {'OUTER ' if o.outer else ''}SQL {name(o.query)}, {name(o.alias)}, {names}"
    if s.output is not None:
        r = s.output
        every = f"{r.events} EVENTS" if r.events is not None else duration(r.every) if r.every else ""
        out += f" OUTPUT {r.kind.upper()} EVERY {every}"
    return out


def pattern(p: ast.PatternFrom) -> str:
    out = f"{p.kind.upper()} {_pattern_group(p.body)}"
    if p.within is not None:
        out += f" WITHIN {duration(p.within)}"
    if p.partition:
        out += " PARTITION BY " + ", ".join(expr(n) for n in p.partition)
    return out


def _pattern_group(g: ast.PatternGroup) -> str:
    out = _pattern_element(g.items[0])
    for sep, item in zip(g.separators, g.items[1:], strict=True):
        out += f"{' -> ' if sep == '->' else ', '}{_pattern_element(item)}"
    return out


def _pattern_element(e: ast.PatternElement) -> str:
    if isinstance(e, ast.PatternGroup):
        return f"({_pattern_group(e)})"
    if isinstance(e, ast.PatternEvery):
        # EVERY takes the whole element after it (a step, an AND/OR or a group, which keeps its
        # parentheses), so no parentheses are added
        return f"EVERY {_pattern_element(e.body)}"
    if isinstance(e, ast.PatternLogical):
        return f"{_pattern_operand(e.left)} {e.op.upper()} {_pattern_operand(e.right)}"
    return _pattern_operand(e)


def _pattern_operand(e: ast.PatternStep | ast.PatternAbsence) -> str:
    cond = f"[{expr(e.condition)}]" if e.condition is not None else ""
    if isinstance(e, ast.PatternAbsence):
        wait = f" FOR {duration(e.wait)}" if e.wait is not None else ""
        return f"NOT {name(e.stream)}{cond}{wait}"
    out = f"{name(e.alias)}={name(e.stream)}{cond}"
    if e.count is not None:
        lo, hi = e.count
        out += f"<{lo}>" if lo == hi else f"<{lo}:{'' if hi is None else hi}>"
    elif e.quantifier is not None:
        out += e.quantifier
    return out


def _fields(fields: tuple[ast.FieldDef, ...]) -> str:
    return ", ".join(f"{name(f.name)} {type_name(f.type)}" for f in fields)


def statement(st: ast.Statement) -> str:
    if isinstance(st, ast.CreateStreamSchema):
        out = f"CREATE STREAMSCHEMA {name(st.name)} WITH {_fields(st.fields)}"
        if st.timestamp_by:
            out += f" TIMESTAMP BY {name(st.timestamp_by)}"
            if st.watermark:
                out += f" WATERMARK {duration(st.watermark)}"
        return out
    if isinstance(st, ast.CreateWindow):
        return f"CREATE WINDOW {name(st.name)} AS {window(st.spec)}"
    if isinstance(st, ast.CreateDataStore):
        return f"CREATE DATASTORE {name(st.name)} TYPE {name(st.type)}"
    if isinstance(st, ast.CreateSqlQuery):
        out = f"CREATE SQLQUERY {name(st.name)} ON {name(st.store)} AS {string(st.text)}"
        if st.returns:
            out += f" RETURNS ({_fields(st.returns)})"
        if st.cache_rows is not None:
            out += f" CACHE {st.cache_rows} ROWS"
            if st.cache_ttl:
                out += f" TTL {duration(st.cache_ttl)}"
        return out
    if isinstance(st, ast.CreateTable):
        cols = []
        for c in st.columns:
            text = f"{name(c.name)} {type_name(c.type)}"
            text += " PRIMARY KEY" if c.primary_key else ""
            text += " NOT NULL" if c.not_null else ""
            cols.append(text)
        if st.primary_key:
            cols.append(f"PRIMARY KEY ({', '.join(name(k) for k in st.primary_key)})")
        out = f"CREATE TABLE {name(st.name)} ({', '.join(cols)}) IN {name(st.store)}"
        return out + (f" TTL {duration(st.ttl)}" if st.ttl else "")
    if isinstance(st, ast.CreateTrigger):
        at = duration(st.every) if st.every else string(st.cron) if st.cron is not None else "START"
        return f"CREATE TRIGGER {name(st.name)} AT {'EVERY ' if st.every else ''}{at}"
    return f"INSERT INTO {'TABLE ' if st.into_table else ''}{name(st.target)} {select(st.select)}"


def script(s: ast.Script) -> str:
    return "".join(statement(st) + ";\n" for st in s.statements)
