"""The CPL abstract syntax tree: what a script says, with the source position of every piece.

Positions are excluded from equality so that `parse(unparse(tree)) == tree` can be tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pos:
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


NOPOS = Pos(0, 0, 0, 0)


def _pos() -> Pos:
    return field(default=NOPOS, compare=False, repr=False)


# ---- expressions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    pass


@dataclass(frozen=True)
class Literal(Expr):
    kind: str  # "int" | "decimal" | "string" | "bool" | "null" | "timestamp"
    value: object  # int, str (decimal text, string, timestamp text), bool or None
    pos: Pos = _pos()


@dataclass(frozen=True)
class Name(Expr):
    parts: tuple[str, ...]  # ("field",) or ("stream", "field")
    pos: Pos = _pos()


@dataclass(frozen=True)
class UnaryOp(Expr):
    op: str  # "not" | "-" | "+"
    arg: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class BinaryOp(Expr):
    op: str  # + - * / % || = <> < <= > >= and or
    left: Expr
    right: Expr
    pos: Pos = _pos()


@dataclass(frozen=True)
class IsNull(Expr):
    arg: Expr
    negated: bool
    pos: Pos = _pos()


@dataclass(frozen=True)
class Between(Expr):
    arg: Expr
    low: Expr
    high: Expr
    negated: bool
    pos: Pos = _pos()


@dataclass(frozen=True)
class InList(Expr):
    arg: Expr
    items: tuple[Expr, ...]
    negated: bool
    pos: Pos = _pos()


@dataclass(frozen=True)
class Like(Expr):
    arg: Expr
    pattern: Expr
    negated: bool
    pos: Pos = _pos()


@dataclass(frozen=True)
class Case(Expr):
    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    else_: Expr | None
    pos: Pos = _pos()


@dataclass(frozen=True)
class TypeName:
    name: str  # lower case as written: "integer", "varchar", ...
    args: tuple[int, ...] = ()
    pos: Pos = _pos()


@dataclass(frozen=True)
class Cast(Expr):
    arg: Expr
    to: TypeName
    pos: Pos = _pos()


@dataclass(frozen=True)
class Call(Expr):
    name: str  # lower case
    args: tuple[Expr, ...]
    star: bool = False  # count(*)
    distinct: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class Indexed(Expr):
    """One event a pattern's counted step collected: `e2[0].f`, `e2[last].f`, `e2[last - 1].f`."""

    alias: str
    field: str
    index: int | None = None  # from the first: e[0], e[1] ...
    from_last: int | None = None  # from the last: e[last] is 0, e[last - 1] is 1
    pos: Pos = _pos()


def expr_children(e: Expr) -> list[Expr]:
    """The sub-expressions of an expression, in source order."""
    out: list[Expr] = []
    for v in vars(e).values():
        if isinstance(v, Expr):
            out.append(v)
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, Expr):
                    out.append(x)
                elif isinstance(x, tuple):
                    out.extend(y for y in x if isinstance(y, Expr))
    return out


# ---- declarations and statements ------------------------------------------------------------


@dataclass(frozen=True)
class Duration:
    amount: int
    unit: str  # as written, lower case
    pos: Pos = _pos()


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # "tuple" | "time" | "batch"
    size: int | Duration | None = None
    advance: int | Duration | None = None
    start: Expr | None = None
    stop: Expr | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class FieldDef:
    name: str
    type: TypeName
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreateStreamSchema:
    name: str
    fields: tuple[FieldDef, ...]
    timestamp_by: str | None = None
    watermark: Duration | None = None
    pos: Pos = _pos()
    name_pos: Pos = _pos()
    timestamp_pos: Pos = _pos()


@dataclass(frozen=True)
class CreateWindow:
    name: str
    spec: WindowSpec
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreateDataStore:
    name: str
    type: str
    pos: Pos = _pos()
    type_pos: Pos = _pos()


@dataclass(frozen=True)
class CreateSqlQuery:
    name: str
    store: str
    text: str
    returns: tuple[FieldDef, ...] = ()
    cache_rows: int | None = None
    cache_ttl: Duration | None = None
    pos: Pos = _pos()
    store_pos: Pos = _pos()
    text_pos: Pos = _pos()


@dataclass(frozen=True)
class CreateTrigger:
    """`CREATE TRIGGER name AT EVERY duration | AT START | AT 'cron'`: exactly one of `every` and
    `cron` is set, or neither for AT START."""

    name: str
    every: Duration | None = None
    cron: str | None = None
    pos: Pos = _pos()
    name_pos: Pos = _pos()
    at_pos: Pos = _pos()  # what follows AT


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: TypeName
    primary_key: bool = False
    not_null: bool = False
    pos: Pos = _pos()


@dataclass(frozen=True)
class CreateTable:
    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...]  # from a table-level PRIMARY KEY (...) clause
    store: str
    ttl: Duration | None = None
    pos: Pos = _pos()
    store_pos: Pos = _pos()


@dataclass(frozen=True)
class SelectItem:
    expr: Expr | None  # None: *
    alias: str | None = None
    pos: Pos = _pos()


@dataclass(frozen=True)
class FromItem:
    stream: str
    alias: str | None = None
    window: str | WindowSpec | None = None  # a named window or an inline one
    pos: Pos = _pos()
    window_pos: Pos = _pos()


@dataclass(frozen=True)
class OnSql:
    query: str
    alias: str
    names: tuple[tuple[str, ...], ...]  # inputs then outputs; split by the query's parameter count
    outer: bool = False
    pos: Pos = _pos()


# ---- patterns and sequences (FROM PATTERN / FROM SEQUENCE; docs/language.md, "Patterns") -----------


@dataclass(frozen=True)
class PatternStep:
    """`alias=stream[condition]`, taking one event, or several with a count or a quantifier."""

    alias: str
    stream: str
    condition: Expr | None = None
    count: tuple[int, int | None] | None = None  # <n> (n, n), <n:m>, <n:> (n, None), <:m> (0, m)
    quantifier: str | None = None  # "+", "*" or "?" (sequences only: the planner says so)
    pos: Pos = _pos()
    alias_pos: Pos = _pos()
    stream_pos: Pos = _pos()


@dataclass(frozen=True)
class PatternAbsence:
    """`NOT stream[condition] FOR d`; without FOR, the `NOT stream[condition] AND step` form."""

    stream: str
    condition: Expr | None = None
    wait: Duration | None = None
    pos: Pos = _pos()
    stream_pos: Pos = _pos()


@dataclass(frozen=True)
class PatternLogical:
    """`a AND b` (both, in either order) or `a OR b` (the first of either)."""

    op: str  # "and" | "or"
    left: PatternStep | PatternAbsence
    right: PatternStep | PatternAbsence
    pos: Pos = _pos()


@dataclass(frozen=True)
class PatternEvery:
    """`EVERY element`: a new match at every fitting event (a step) or after each completion (a group)."""

    body: PatternElement
    pos: Pos = _pos()


@dataclass(frozen=True)
class PatternGroup:
    """Elements one after the other: `a -> b` (PATTERN: events may come in between) or `a, b`
    (SEQUENCE: the very next event); `separators[i]` is what stands between items i and i + 1."""

    items: tuple[PatternElement, ...]
    separators: tuple[str, ...] = ()  # "->" or ","
    pos: Pos = _pos()
    separator_pos: tuple[Pos, ...] = field(default=(), compare=False, repr=False)


PatternElement = PatternStep | PatternAbsence | PatternLogical | PatternEvery | PatternGroup


@dataclass(frozen=True)
class PatternFrom:
    """FROM PATTERN | SEQUENCE ... [WITHIN d] [PARTITION BY ...]."""

    kind: str  # "pattern" | "sequence"
    body: PatternGroup
    within: Duration | None = None
    partition: tuple[Name, ...] = ()  # `field`, or one `stream.field` per stream
    pos: Pos = _pos()


@dataclass(frozen=True)
class OutputRate:
    """`OUTPUT [ALL | FIRST | LAST | SNAPSHOT] EVERY n EVENTS | EVERY duration` (docs/language.md,
    "Output rate limiting"): exactly one of `events` and `every` is set."""

    kind: str  # "all" | "first" | "last" | "snapshot"
    events: int | None = None
    every: Duration | None = None
    pos: Pos = _pos()
    every_pos: Pos = _pos()  # the count or duration after EVERY


@dataclass(frozen=True)
class Select:
    items: tuple[SelectItem, ...]
    sources: tuple[FromItem, ...]
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    on_sql: OnSql | None = None
    pos: Pos = _pos()
    pattern: PatternFrom | None = None  # FROM PATTERN/SEQUENCE (then `sources` is empty)
    output: OutputRate | None = None  # OUTPUT ... EVERY ...


@dataclass(frozen=True)
class Insert:
    target: str
    select: Select
    into_table: bool = False
    pos: Pos = _pos()
    target_pos: Pos = _pos()


Statement = (
    CreateStreamSchema
    | CreateWindow
    | CreateDataStore
    | CreateSqlQuery
    | CreateTable
    | CreateTrigger
    | Insert
)


@dataclass(frozen=True)
class Script:
    statements: tuple[Statement, ...]
