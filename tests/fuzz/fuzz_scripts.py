"""Valid CPL scripts for the differential fuzzer, statement by statement.

`cases()` draws a whole `Case`: one or two source streams (with or without event time and a
WATERMARK), then a few statements, each reading streams declared or produced before it: Map,
Filter, MultiFilter (several WHEREs over one stream), Union, Aggregate over TIME, TUPLE and BATCH
windows (with ADVANCE, GROUP BY and HAVING), Join, `ON [OUTER] SQL` reads and writes, and
`INSERT INTO TABLE` into a SQLite or PostgreSQL store. After each statement the script so far is
compiled, and the compiled schema of the new stream (types as the compiler derives them) is what
the next statements draw their expressions from; so every script the generator returns compiles,
and one that does not is a bug of the generator or of the compiler (`GeneratorError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuzz_case import Case, StoreTable
from fuzz_exprs import BOOL, INT, NUMERIC, ORDERED, Draw, Field, category, expr
from fuzz_inputs import UNIT_S, records, split
from hypothesis import strategies as st

from cpl.compiler import compile_script
from cpl.errors import CompileError
from operators import graph as g


class GeneratorError(Exception):
    """A script the generator built does not compile: a bug of the generator (or the compiler)."""


@dataclass
class Stream:
    name: str
    fields: list[tuple[str, str, int | None, int | None]]  # name, kind, precision, scale
    event_time: str | None
    source: bool
    # the output order the language defines: None (a multiset), [] (the whole stream, in event
    # time then arrival), or the fields of a group within which rows come in order
    order: list[str] | None

    def scope(self, qualifier: str | None = None) -> list[Field]:
        out = []
        for name, kind, _, _ in self.fields:
            cat = category(kind)
            if cat is not None:
                out.append(Field(f"{qualifier}.{name}" if qualifier else name, cat))
        return out

    def names(self, cat: str | None = None) -> list[str]:
        return [n for n, k, _, _ in self.fields if cat is None or category(k) == cat]


SOURCE_FIELDS = [
    ("v", "integer"),
    ("n", "bigint"),
    ("x", "double"),
    ("d", "decimal(8, 2)"),
    ("s", "varchar"),
    ("b", "boolean"),
]
WATERMARKS = ["", "", " WATERMARK 5 SECONDS", " WATERMARK 1 MINUTE"]

STORE_TABLES = {
    "ref": StoreTable(
        "ref",
        "CREATE TABLE ref (k integer, a integer, name varchar(20), w double precision)",
        ("k", "a", "name", "w"),
        (
            (0, 10, "zero", 0.5),
            (1, 11, "one", 1.5),
            (1, 12, "uno", -2.0),
            (2, None, "two", None),
            (3, 13, None, 3.25),
        ),
    ),
    "log": StoreTable("log", "CREATE TABLE log (k bigint, v bigint)", ("k", "v")),
    "acc": StoreTable(
        "acc",
        "CREATE TABLE acc (k bigint PRIMARY KEY, total bigint)",
        ("k", "total"),
        ((0, 0), (1, 0), (2, 0), (3, 0)),
    ),
}
READ_QUERIES = {
    "by_key": ("SELECT a, name FROM ref WHERE k = ? ORDER BY a", "RETURNS (a integer, name varchar)", 1, 2),
    "weights": ("SELECT w FROM ref WHERE k = ? ORDER BY w", "RETURNS (w double)", 1, 1),
    "count_over": ("SELECT count(*) FROM ref WHERE a >= ?", "RETURNS (c bigint)", 1, 1),
}
WRITE_QUERIES = {
    "log_it": ("INSERT INTO log (k, v) VALUES (?, ?)", "log", 2),
    "add_to": ("UPDATE acc SET total = total + ? WHERE k = ?", "acc", 2),
}


class Builder:
    """The script so far, compiled after each statement."""

    def __init__(self, draw: Draw, store: str | None) -> None:
        self.draw = draw
        self.store = store
        self.decls: list[str] = []
        self.stmts: list[str] = []
        self.streams: dict[str, Stream] = {}
        self.tables: dict[str, StoreTable] = {}
        self.written: list[str] = []
        self.queries: set[str] = set()
        self.read: set[str] = set()  # the streams some statement reads
        self.n = 0
        if store:
            self.decls.append(f"CREATE DATASTORE db TYPE {store}")

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def script(self, extra: list[str] | None = None) -> str:
        return "".join(f"{s};\n" for s in [*self.decls, *self.stmts, *(extra or [])])

    def compile(self, extra: list[str] | None = None) -> g.Graph:
        text = self.script(extra)
        try:
            return compile_script(text).graph
        except CompileError as err:
            raise GeneratorError(f"{err}\n--- script ---\n{text}") from None

    def add(self, stmt: str, outputs: dict[str, list[str] | None], reads: list[str]) -> None:
        """Append an INSERT reading `reads` and learn its outputs' schemas."""
        self.stmts.append(stmt)
        self.read.update(reads)
        graph = self.compile()
        for name, order in outputs.items():
            self.streams[name] = stream_of(graph, name, order)

    def schema_of(self, select: str) -> Stream:
        """The schema a SELECT would produce, without keeping it."""
        graph = self.compile([f"INSERT INTO probe__ {select}"])
        return stream_of(graph, "probe__", None)

    def source(self, name: str, fields: list[tuple[str, str]], timed: bool) -> None:
        cols = ", ".join(f"{n} {t}" for n, t in fields)
        if timed:
            cols += f", ts timestamp TIMESTAMP BY ts{self.draw(st.sampled_from(WATERMARKS))}"
        self.decls.append(f"CREATE STREAMSCHEMA {name} WITH k integer, {cols}")
        graph = compile_script(self.script(["INSERT INTO probe__ SELECT * FROM " + name])).graph
        self.streams[name] = stream_of(graph, name, [], source=True)  # its events keep their order

    def need_table(self, name: str) -> None:
        self.tables.setdefault(name, STORE_TABLES[name])


def stream_of(graph: g.Graph, name: str, order: list[str] | None, source: bool = False) -> Stream:
    """What the compiled graph says of stream `name` (a statement's output unless `source`: a
    SELECT * may compile to no node of its own, its stream then being its input's port)."""
    port = graph.streams[name]
    node = graph.node(port.node)
    fields = [(f.name, f.type.kind, f.type.precision, f.type.scale) for f in node.schema]
    event_time = getattr(node, "event_time", None)
    return Stream(name, fields, event_time, source, order)


# ---- statements ----------------------------------------------------------------------------------------


def _pick(b: Builder, pred: Any = None) -> Stream:
    options = [s for s in b.streams.values() if pred is None or pred(s)]
    chosen: Stream = b.draw(st.sampled_from(options))
    return chosen


def _where(b: Builder, s: Stream, chance: int = 2) -> str:
    if b.draw(st.integers(0, chance)) == 0:
        return ""
    return f" WHERE {expr(b.draw, BOOL, s.scope(), 2)}"


def map_statement(b: Builder) -> None:
    s = _pick(b)
    out = b.fresh("m")
    if b.draw(st.integers(0, 3)) == 0:
        items = ["*"]
    else:
        keep = [n for n in s.names() if n in ("k", s.event_time) or b.draw(st.booleans())]
        items = list(keep)
    for _ in range(b.draw(st.integers(0 if items else 1, 3))):
        cat = b.draw(st.sampled_from(["int", "double", "decimal", "string", "bool", "timestamp"]))
        items.append(f"{expr(b.draw, cat, s.scope(), 3)} AS {b.fresh('c')}")
    b.add(
        f"INSERT INTO {out} SELECT {', '.join(items)} FROM {s.name}{_where(b, s)}", {out: s.order}, [s.name]
    )


def filter_statement(b: Builder) -> None:
    s = _pick(b)
    outs = [b.fresh("f") for _ in range(b.draw(st.integers(1, 3)))]  # several: a MultiFilter
    for out in outs:
        b.stmts.append(f"INSERT INTO {out} SELECT * FROM {s.name} WHERE {expr(b.draw, BOOL, s.scope(), 2)}")
    b.read.add(s.name)
    graph = b.compile()
    for out in outs:
        b.streams[out] = stream_of(graph, out, s.order)


def union_statement(b: Builder) -> bool:
    pairs = [
        (x, y)
        for x in b.streams.values()
        for y in b.streams.values()
        if x.name < y.name and x.fields == y.fields and (x.event_time is None) == (y.event_time is None)
    ]
    if not pairs:
        return False
    x, y = b.draw(st.sampled_from(pairs))
    out = b.fresh("u")
    order = [] if x.event_time and x.order == [] and y.order == [] else None
    b.add(f"INSERT INTO {out} SELECT * FROM {x.name}, {y.name}", {out: order}, [x.name, y.name])
    return True


def _window(b: Builder, s: Stream) -> tuple[str, str]:
    """(kind, WINDOW text)."""
    kinds = ["tuple", "batch"] + (["time", "time"] if s.event_time else [])
    kind = b.draw(st.sampled_from(kinds))
    if kind == "time":
        size = b.draw(st.sampled_from([1, 2, 3])) * UNIT_S
        advance = b.draw(st.sampled_from([size, size, UNIT_S // 2, UNIT_S]))
        adv = f" ADVANCE {min(advance, size)} SECONDS" if advance != size else ""
        return kind, f"TIME SIZE {size} SECONDS{adv}"
    if kind == "tuple":
        size = b.draw(st.integers(1, 4))
        adv = f" ADVANCE {b.draw(st.integers(1, 5))}" if b.draw(st.booleans()) else ""
        return kind, f"TUPLE SIZE {size}{adv}"
    start = expr(b.draw, BOOL, s.scope(), 1)
    stop = expr(b.draw, BOOL, s.scope(), 1)
    return kind, f"BATCH START {start} STOP {stop}"


def _aggregates(b: Builder, s: Stream) -> list[tuple[str, bool]]:
    """Aggregate calls over `s`, each with whether its value is a number."""
    out = []
    for _ in range(b.draw(st.integers(1, 3))):
        fn = b.draw(st.sampled_from(["count", "count", "sum", "avg", "min", "max"]))
        if fn == "count" and b.draw(st.booleans()):
            out.append(("count(*)", True))
            continue
        cats = NUMERIC if fn in ("sum", "avg") else ORDERED if fn in ("min", "max") else None
        scope = [f for f in s.scope() if cats is None or f.cat in cats]
        if not scope:
            out.append(("count(*)", True))
            continue
        arg = b.draw(st.sampled_from(scope))
        out.append((f"{fn}({arg.ref})", fn in ("count", "sum", "avg") or arg.cat in NUMERIC))
    return out


def aggregate_statement(b: Builder, into_table: bool = False) -> None:
    s = _pick(b)
    kind, window = _window(b, s)
    keys = ["k"] if "k" in s.names(INT) and b.draw(st.integers(0, 3)) > 0 else []
    items = list(keys)
    for agg, numeric in _aggregates(b, s):
        extra = (
            f" + {b.draw(st.sampled_from(['1', '0.5']))}"
            if numeric and b.draw(st.integers(0, 4)) == 0
            else ""
        )
        items.append(f"{agg}{extra} AS {b.fresh('a')}")
    if kind == "time":
        items += [f"window_start() AS {b.fresh('ws')}", f"window_end() AS {b.fresh('we')}"]
    group = f" GROUP BY {', '.join(keys)}" if keys else ""
    having = ""
    if b.draw(st.integers(0, 3)) == 0:
        having = f" HAVING count(*) > {b.draw(st.integers(0, 2))}"
    select = f"SELECT {', '.join(items)} FROM {s.name} WINDOW {window}{_where(b, s, 3)}{group}{having}"
    if into_table:
        _materialize(b, select, keys, s.name)
        return
    out = b.fresh("g")
    b.add(f"INSERT INTO {out} {select}", {out: keys}, [s.name])


def join_statement(b: Builder) -> bool:
    timed = [s for s in b.streams.values() if s.event_time and "k" in s.names(INT)]
    if not timed:
        return False
    left = b.draw(st.sampled_from(timed))
    right = b.draw(st.sampled_from(timed))
    lsize, rsize = (b.draw(st.sampled_from([1, 2, 3])) * UNIT_S for _ in range(2))
    lf = [f for f in left.names() if f not in ("k", left.event_time)]
    rf = [f for f in right.names() if f not in ("k", right.event_time)]
    items = ["l.k AS k", f"l.{left.event_time} AS ts"]
    items += [f"l.{f} AS l_{f}" for f in lf[: b.draw(st.integers(0, 2))]]
    items += [f"r.{f} AS r_{f}" for f in rf[: b.draw(st.integers(0, 2))]]
    items.append(f"r.{right.event_time} AS r_ts")
    cond = "l.k = r.k"
    if b.draw(st.integers(0, 2)) == 0:
        cond += f" AND {expr(b.draw, BOOL, [*left.scope('l'), *right.scope('r')], 1)}"
    out = b.fresh("j")
    b.add(
        f"INSERT INTO {out} SELECT {', '.join(items)} FROM {left.name} AS l WINDOW TIME SIZE {lsize} SECONDS, "
        f"{right.name} AS r WINDOW TIME SIZE {rsize} SECONDS WHERE {cond}",
        {out: None},
        [left.name, right.name],
    )
    return True


def _declare_query(b: Builder, name: str, text: str, returns: str) -> None:
    if name not in b.queries:
        b.queries.add(name)
        b.decls.append(f"CREATE SQLQUERY {name} ON db AS '{text}' {returns}".rstrip())


def read_statement(b: Builder) -> bool:
    candidates = [s for s in b.streams.values() if s.names(INT)]
    if not b.store or not candidates:
        return False
    s = b.draw(st.sampled_from(candidates))
    qname = b.draw(st.sampled_from(sorted(READ_QUERIES)))
    text, returns, nparams, nout = READ_QUERIES[qname]
    if b.draw(st.integers(0, 3)) == 0:
        returns = ""  # untyped: read as the store describes it
    _declare_query(b, qname, text, returns)
    b.need_table("ref")
    params = [b.draw(st.sampled_from(s.names(INT))) for _ in range(nparams)]
    outs = [b.fresh("r") for _ in range(nout)]
    outer = "OUTER " if b.draw(st.booleans()) else ""
    where = _where(b, s, 3)
    out = b.fresh("q")
    b.add(
        f"INSERT INTO {out} SELECT * FROM {s.name}{where} ON {outer}SQL {qname}, p, {', '.join(params + outs)}",
        {out: s.order},
        [s.name],
    )
    return True


def write_statement(b: Builder) -> bool:
    candidates = [s for s in b.streams.values() if s.names(INT)]
    if not b.store or not candidates:
        return False
    s = b.draw(st.sampled_from(candidates))
    qname = b.draw(st.sampled_from(sorted(WRITE_QUERIES)))
    text, table, nparams = WRITE_QUERIES[qname]
    _declare_query(b, qname, text, "")
    b.need_table(table)
    if table not in b.written:
        b.written.append(table)
    params = [b.draw(st.sampled_from(s.names(INT))) for _ in range(nparams)]
    count = [b.fresh("n")] if b.draw(st.booleans()) else []
    out = b.fresh("w")
    b.add(
        f"INSERT INTO {out} SELECT * FROM {s.name}{_where(b, s, 3)} ON SQL {qname}, x, {', '.join(params + count)}",
        {out: s.order},
        [s.name],
    )
    return True


def _materialize(b: Builder, select: str, keys: list[str], source: str) -> None:
    shape = b.schema_of(select)
    table = b.fresh("t")
    cols = [f"{n} {_type_text(k, p, sc)}" for n, k, p, sc in shape.fields]
    key = f", PRIMARY KEY ({', '.join(keys)})" if keys and b.draw(st.integers(0, 3)) > 0 else ""
    b.decls.append(f"CREATE TABLE {table} ({', '.join(cols)}{key}) IN db")
    b.written.append(table)
    b.stmts.append(f"INSERT INTO TABLE {table} {select}")
    b.read.add(source)
    b.compile()


def _type_text(kind: str, precision: int | None, scale: int | None) -> str:
    return f"decimal({precision}, {scale or 0})" if kind == "decimal" else kind


def table_statement(b: Builder) -> bool:
    if not b.store:
        return False
    if b.draw(st.booleans()):
        aggregate_statement(b, into_table=True)
        return True
    s = _pick(b, lambda s: "k" in s.names(INT))
    items = ", ".join(n for n in s.names() if n != s.event_time or b.draw(st.booleans()))
    _materialize(b, f"SELECT {items} FROM {s.name}{_where(b, s, 3)}", ["k"], s.name)
    return True


STATEMENTS = {
    "map": map_statement,
    "filter": filter_statement,
    "union": union_statement,
    "aggregate": aggregate_statement,
    "join": join_statement,
    "read": read_statement,
    "write": write_statement,
    "table": table_statement,
}


@st.composite
def cases(draw: Draw, stores: tuple[str | None, ...] = (None, "sqlite", "postgresql")) -> Case:
    """A whole case: script, inputs, store, and Spark's micro-batch size."""
    store = draw(st.sampled_from(stores))
    b = Builder(draw, {"sqlite": "sqlite", "postgresql": "postgresql"}.get(store or ""))
    fields = draw(st.lists(st.sampled_from(SOURCE_FIELDS), min_size=1, max_size=4, unique=True))
    timed = draw(st.integers(0, 4)) > 0
    b.source("s1", fields, timed)
    if draw(st.booleans()):
        same = draw(st.booleans())
        other = (
            fields
            if same
            else draw(st.lists(st.sampled_from(SOURCE_FIELDS), min_size=1, max_size=3, unique=True))
        )
        b.source("s2", other, timed if same else draw(st.booleans()))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(sorted(STATEMENTS)))
        made = STATEMENTS[kind](b)
        if made is False:
            map_statement(b)
    inputs = {}
    for s in (x for x in b.streams.values() if x.source):
        lines = records(draw, s.fields, s.event_time, draw(st.integers(0, 14)))
        inputs[s.name] = split(draw, lines)
    # Every stream no statement reads, and some of the others: each sink is a streaming query on
    # Spark (stateless ones share one), the largest cost of a case.
    read = b.read
    sinks = [
        s.name for s in b.streams.values() if not s.source and (s.name not in read or draw(st.booleans()))
    ]
    ordered = {s.name: s.order for s in b.streams.values() if not s.source and s.order is not None}
    return Case(
        script=b.script(),
        inputs=inputs,
        sinks=sinks,
        store=store,
        tables=list(b.tables.values()),
        compare_tables=list(b.written),
        max_files=draw(st.sampled_from([None, 1, 2])),
        ordered=ordered,
        mtimes=draw(st.sampled_from(["increasing", "equal", "reversed"])),
        partitions=draw(st.sampled_from([1, 2])),
    )
