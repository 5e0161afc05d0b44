"""The statements the differential fuzzer draws, each over any stream declared or produced before it.

Every kind of statement reads every kind of upstream the language allows: a Map, Filter or
MultiFilter, an Aggregate (TIME, TUPLE, BATCH) or an `ON SQL` over a source, a Map, a Union, a join's
pairs, an aggregate's rows or a data store call's results; a Join over any two streams with event
time (a source, a Map's, a Union's, another join's, a store call's: an aggregate's rows have no
event time, so no join reads them); a Union of any two streams of one schema, and of two twin
statements (the same SELECT over two streams of one schema, or over one stream twice), so that
unions of aggregates, joins and Maps are met. Every expression position may draw an expression that
fails on some events (fuzz_exprs.at). Only what gives the same rows in any input order reads what a
Union without event time produced (fuzz_scripts.Stream.merged; docs/language.md, "Merges").

A statement is drawn as a template of its SELECT with its inputs left open (`{src}`, `{left}`,
`{right}`), so that a twin is the same text over another stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fuzz_coverage import HELD, IN_AGGREGATION
from fuzz_exprs import BOOL, CATEGORIES, INT, NUMERIC, ORDERED, STR, Field, category
from fuzz_output import grouping, limit, limit_join
from fuzz_patterns import pattern
from fuzz_queries import READ_QUERIES, WRITE_QUERIES, read_queries, write_queries
from fuzz_windows import time_spec, tuple_spec
from hypothesis import strategies as st

if TYPE_CHECKING:
    from fuzz_scripts import Builder, Stream


def _fill(template: str, **names: str) -> str:
    for key, name in names.items():
        template = template.replace("{" + key + "}", name)
    return template


def _where(b: Builder, s: Stream, chance: int = 2) -> str:
    if b.force is not None and not b.forced("WHERE"):
        return ""  # aimed at another position: let every event reach it
    if not b.forced("WHERE") and b.draw(st.integers(0, chance)) == 0:
        return ""
    return f" WHERE {b.at(BOOL, s.scope(), 2, 'WHERE')}"


# ---- one input --------------------------------------------------------------------------------------


def map_select(b: Builder, s: Stream) -> tuple[str, list[str] | None]:
    if b.draw(st.integers(0, 3)) == 0 and not b.drop_time:
        items = ["*"]
    else:
        # the event time dropped one time in six: what reads the rows after it has only their order
        # (a sink, a keyed table, an update over a delayed stream or a merge: probing seed 2234; a
        # window or an OUTPUT limit: probing seed 3511), always when aimed so (fuzz_aims.aim_released)
        dropped = s.event_time is not None and (b.draw(st.integers(0, 5)) == 0 or b.drop_time)
        ts = () if dropped else (s.event_time,)
        items = [n for n in s.names() if n in ("k", *ts) or (n != s.event_time and b.draw(st.booleans()))]
    # aimed at (or made for) a failure path: a computed item, so that the Map is not left out
    for _ in range(b.draw(st.integers(0 if items and b.force is None else 1, 3))):
        cat = b.draw(st.sampled_from(CATEGORIES))
        items.append(f"{b.at(cat, s.scope(), 3, 'SELECT')} AS {b.fresh('c')}")
    return f"SELECT {', '.join(items)} FROM {{src}}{_where(b, s)}", s.order


def filter_select(b: Builder, s: Stream) -> tuple[str, list[str] | None]:
    return f"SELECT * FROM {{src}} WHERE {b.at(BOOL, s.scope(), 2, 'WHERE')}", s.order


def _aggregates(b: Builder, s: Stream) -> list[tuple[str, str]]:
    """Aggregate calls over `s`, each with the category of its value; an argument may be an
    expression, which may fail on some events."""
    out = []
    for _ in range(b.draw(st.integers(1, 3))):
        fn = b.draw(st.sampled_from(["count", "count", "sum", "avg", "min", "max"]))
        if fn == "count" and b.draw(st.booleans()):
            out.append(("count(*)", INT))
            continue
        cats = NUMERIC if fn in ("sum", "avg") else ORDERED if fn in ("min", "max") else CATEGORIES
        cat = b.draw(st.sampled_from([c for c in cats if c != "bool" or fn == "count"]))
        fields = [f for f in s.scope() if f.cat == cat]
        if fields and not b.forced("argument") and b.draw(st.integers(0, 2)) > 0:
            arg = b.draw(st.sampled_from(fields)).ref
        else:
            arg = b.at(cat, s.scope(), 1, "argument")
        if arg == "NULL":  # an untyped NULL has no aggregate
            out.append(("count(*)", INT))
            continue
        result = INT if fn == "count" else "double" if fn == "avg" and cat == INT else cat
        out.append((f"{fn}({arg})", result))
    return out


def _group_keys(b: Builder, s: Stream) -> list[tuple[str, str, str]]:
    """GROUP BY keys: (expression, its output name, category); `k` or expressions, which may fail."""
    keys: list[tuple[str, str, str]] = []
    want = grouping(b)  # an aimed OUTPUT clause's: with a GROUP BY or without (fuzz_output)
    if want is False:
        return keys
    if "k" in s.names(INT) and b.draw(st.integers(0, 3)) > 0:
        keys.append(("k", "k", INT))
    if b.forced("GROUP BY") or b.draw(st.integers(0, 3)) == 0 or (want and not keys):
        cat = b.draw(st.sampled_from([INT, STR, BOOL]))
        keys.append((b.at(cat, s.scope(), 1, "GROUP BY"), b.fresh("g"), cat))
    return keys


def aggregate_select(b: Builder, s: Stream) -> tuple[str, list[str] | None]:
    kinds = ["tuple", "batch"] + (["time", "time"] if s.event_time else [])
    kind = b.window_kind or b.draw(st.sampled_from(kinds))
    aimed = b.force is not None  # then windows that fire often, so that rows reach the position
    if kind == "time":
        spec = time_spec(b.draw, common=aimed)
    elif kind == "tuple":
        spec = "TUPLE SIZE 2 ADVANCE 1" if aimed else tuple_spec(b.draw)
    else:
        start = "TRUE" if aimed and not b.forced("START") else b.at(BOOL, s.scope(), 1, "START")
        stop = "TRUE" if aimed and not b.forced("STOP") else b.at(BOOL, s.scope(), 1, "STOP")
        spec = f"BATCH START {start} STOP {stop}"
    keys = _group_keys(b, s)
    aggs = _aggregates(b, s)
    if b.forced("HAVING") or b.forced("SELECT"):
        # a value that varies with the events for the failing expression over the row to read
        varying = [f for f in s.scope() if f.cat in ("int", "string")]
        if varying:
            f = b.draw(st.sampled_from(varying))
            aggs.insert(0, (f"{'sum' if f.cat == 'int' else 'max'}({f.ref})", f.cat))
    over = [Field(text, cat) for text, _, cat in keys] + [Field(a, cat) for a, cat in aggs]
    items = [text if text == name else f"{text} AS {name}" for text, name, _ in keys]
    for i, (agg, cat) in enumerate(aggs):
        # an expression over the aggregates and keys (which may fail on some windows' rows), but
        # never all of them: a windowed statement must compute an aggregate
        value = agg if i == 0 or b.draw(st.integers(0, 2)) > 0 else b.at(cat, over, 1, "SELECT")
        items.append(f"{value} AS {b.fresh('a')}")
    if b.forced("SELECT"):
        agg, cat = aggs[0]
        items.append(f"{b.at(cat, over, 1, 'SELECT')} AS {b.fresh('a')}")
    if kind == "time":
        items += [f"window_start() AS {b.fresh('ws')}", f"window_end() AS {b.fresh('we')}"]
    group = f" GROUP BY {', '.join(text for text, _, _ in keys)}" if keys else ""
    having = ""
    form = 1 if b.forced("HAVING") else b.draw(st.integers(0, 5))
    if b.output is not None and b.output[1] == IN_AGGREGATION:
        # aimed at a limit a TIME window's aggregation holds: without HAVING, or after one that
        # cannot fail, which it evaluates over each window of the bucket
        form = b.draw(st.sampled_from([0, 2]))
    elif b.output is not None and b.output[1] in HELD:
        form = 2  # aimed at a limit the window's processor holds, which it does only without HAVING
    elif b.output is not None and b.output[1] == "aggregate" and b.output[0].endswith(" EVERY duration"):
        # aimed at a limit by time after the window's state, which a HAVING that can fail keeps it
        # at (a TIME window's own aggregation holds the others, as a TUPLE or BATCH window's
        # processor does those without HAVING): a division, by a count, which never fails
        form = 6
    if form == 0:
        having = f" HAVING count(*) > {b.draw(st.integers(0, 2))}"
    elif form == 6:
        having = f" HAVING 100 / count(*) > {b.draw(st.integers(0, 60))}"
    elif form == 1:
        having = f" HAVING {b.at(BOOL, over, 1, 'HAVING')}"
    window = b.window(spec)
    select = f"SELECT {', '.join(items)} FROM {{src}} WINDOW {window}{_where(b, s, 3)}{group}{having}"
    return select, [name for _, name, _ in keys]


def read_select(b: Builder, s: Stream) -> tuple[str, list[str] | None] | None:
    if not b.store:
        return None
    names = read_queries(b.store, bool(s.names(INT)))
    if b.forced("ON SQL") and b.store == "postgresql" and s.names(INT):
        names = ["by_ratio"]  # refuses a parameter of 0: the event is dead-lettered
    qname = b.draw(st.sampled_from(names))
    text, returns, nparams, nout, _ = READ_QUERIES[qname]
    if b.draw(st.integers(0, 3)) == 0:
        returns = ""  # untyped: read as the store describes it
    b.declare_query(qname, text, returns)
    b.need_table("ref")
    params = [b.draw(st.sampled_from(s.names(INT))) for _ in range(nparams)]
    outs = [b.fresh("r") for _ in range(nout)]
    outer = "OUTER " if b.draw(st.booleans()) else ""
    where = _where(b, s, 3)
    on = f" ON {outer}SQL {qname}, p, {', '.join(params + outs)}"
    return f"SELECT * FROM {{src}}{where}{on}", s.order


def write_select(b: Builder, s: Stream) -> tuple[str, list[str] | None] | None:
    if not b.store:
        return None
    has = {category(k) for _, k, _, _ in s.fields}
    names = [q for q in write_queries(INT in has) if set(WRITE_QUERIES[q][2]) <= has]
    if b.forced("ON SQL") and INT in has:
        names = ["strict_put"]  # refuses a NULL v
    qname = b.draw(st.sampled_from(names))
    text, table, cats = WRITE_QUERIES[qname]
    b.declare_query(qname, text, "")
    b.need_table(table)
    if table not in b.written:
        b.written.append(table)
    params = [b.draw(st.sampled_from(s.names())) for _ in cats]
    params = [
        p if p in s.names(cat) else b.draw(st.sampled_from(s.names(cat)))
        for p, cat in zip(params, cats, strict=True)
    ]
    # ON SQL names one field at least: a query without parameters names its count
    count = [b.fresh("n")] if not params or b.draw(st.booleans()) else []
    return f"SELECT * FROM {{src}}{_where(b, s, 3)} ON SQL {qname}, x, {', '.join(params + count)}", s.order


ONE_INPUT = {
    "map": map_select,
    "filter": filter_select,
    "aggregate": aggregate_select,
    "read": read_select,
    "write": write_select,
}


# what gives the same rows whatever order its input comes in (an OUTPUT limit aside: `limit`)
ORDER_FREE = ("map", "filter", "read")


def one_input(b: Builder, kind: str) -> bool:
    s = b.pick(lambda s: kind in ORDER_FREE or not s.merged)
    made = ONE_INPUT[kind](b, s)
    if made is None:
        return False
    template, order = limit(b, s, kind, *made)
    out = b.fresh(kind[0])
    b.add(f"INSERT INTO {out} {_fill(template, src=s.name)}", {out: order}, [s.name], kind)
    return True


def multifilter(b: Builder) -> bool:
    """Several WHEREs over one stream: fused into one MultiFilter."""
    s = b.pick()
    outs = [b.fresh("f") for _ in range(b.draw(st.integers(2, 3)))]
    for out in outs:
        b.stmts.append(f"INSERT INTO {out} SELECT * FROM {s.name} WHERE {b.at(BOOL, s.scope(), 2, 'WHERE')}")
    b.read.add(s.name)
    graph = b.compile()
    for out in outs:
        b.learn(graph, out, s.order, "filter", s.merged)
    return True


# ---- two inputs -----------------------------------------------------------------------------------------


def _join_key(b: Builder, left: Stream, right: Stream) -> str | None:
    """An integer field of both sides for the equality (`k` when both have it), or None."""
    common = [n for n in left.names(INT) if n in right.names(INT)]
    if not common:
        return None
    chosen: str = "k" if "k" in common and b.draw(st.integers(0, 3)) > 0 else b.draw(st.sampled_from(common))
    return chosen


def join_select(b: Builder, left: Stream, right: Stream) -> tuple[str, list[str] | None]:
    both = [*left.scope("l"), *right.scope("r")]
    key = _join_key(b, left, right)
    conds = []
    if key is not None and b.draw(st.integers(0, 3)) > 0:
        conds.append(f"l.{key} = r.{key}")
    if not conds or b.forced("condition") or b.draw(st.integers(0, 2)) == 0:
        conds.append(b.at(BOOL, both, 1, "condition"))
    lf = [f for f in left.names() if f not in ("k", left.event_time)]
    # (`ts` a field of its own, the event time being another: its copy would clash with r_ts)
    rf = [f for f in right.names() if f not in ("k", "ts", right.event_time)]
    items = (["l.k AS k"] if "k" in left.names() else []) + [f"l.{left.event_time} AS ts"]
    items += [f"l.{f} AS l_{f}" for f in lf[: b.draw(st.integers(0, 2))]]
    items += [f"r.{f} AS r_{f}" for f in rf[: b.draw(st.integers(0, 2))]]
    items.append(f"r.{right.event_time} AS r_ts")
    for _ in range(b.draw(st.integers(1 if b.forced("SELECT") else 0, 2))):
        items.append(f"{b.at(b.draw(st.sampled_from(CATEGORIES)), both, 2, 'SELECT')} AS {b.fresh('c')}")
    lw, rw = b.window(time_spec(b.draw)), b.window(time_spec(b.draw))
    return (
        f"SELECT {', '.join(items)} FROM {{left}} AS l WINDOW {lw}, {{right}} AS r WINDOW {rw} "
        f"WHERE {' AND '.join(conds)}",
        None,
    )


def join(b: Builder) -> bool:
    timed = [s for s in b.streams.values() if s.event_time]
    if not timed:
        return False
    left, right = b.pick(lambda s: s.event_time is not None), b.draw(st.sampled_from(timed))
    template, order = limit_join(b, *join_select(b, left, right))
    out = b.fresh("j")
    b.add(
        f"INSERT INTO {out} {_fill(template, left=left.name, right=right.name)}",
        {out: order},
        [left.name, right.name],
        "join",
    )
    return True


def _union(b: Builder, x: Stream, y: Stream) -> None:
    out = b.fresh("u")
    order = [] if x.event_time and x.order == [] and y.order == [] else None
    b.add(f"INSERT INTO {out} SELECT * FROM {x.name}, {y.name}", {out: order}, [x.name, y.name], "union")
    if x.event_time is None:
        b.streams[out].merged = True  # its inputs interleave as they arrive (Stream.merged)


def _alike(x: Stream, y: Stream) -> bool:
    return x.fields == y.fields and (x.event_time is None) == (y.event_time is None)


def union_of(b: Builder, s: Stream) -> bool:
    """A Union of `s` and a stream of its schema: one there is, or a WHERE over `s` made for it."""
    others = [t for t in b.streams.values() if t.name != s.name and _alike(s, t)]
    if others:
        twin = b.draw(st.sampled_from(others))
    else:
        template, order = filter_select(b, s)
        out = b.fresh("f")
        b.add(f"INSERT INTO {out} {_fill(template, src=s.name)}", {out: order}, [s.name], "filter")
        twin = b.streams[out]
    _union(b, s, twin)
    return True


def union_of_sources(b: Builder) -> str | None:
    """The Union of the two sources, made, when both have event time and one schema (its name)."""
    sources = [s for s in b.streams.values() if s.source and s.event_time]
    if len(sources) != 2 or not _alike(*sources):
        return None
    _union(b, *sources)
    return list(b.streams)[-1]


def union(b: Builder) -> bool:
    pairs = [
        (x, y) for x in b.streams.values() for y in b.streams.values() if x.name < y.name and _alike(x, y)
    ]
    if not pairs:
        return False
    x, y = b.draw(st.sampled_from(pairs))
    _union(b, x, y)
    return True


def twins(b: Builder) -> bool:
    """The same statement over two streams of one schema (or one stream twice), then their Union:
    unions of Maps', aggregates', joins' and data store calls' outputs."""
    kind = b.draw(st.sampled_from(["map", "aggregate", "join", "read", "filter"]))
    if kind == "join" and not any(t.event_time for t in b.streams.values()):
        return False
    s = b.pick(
        lambda s: (kind != "join" or s.event_time is not None) and (kind in ORDER_FREE or not s.merged)
    )
    # a limit is drawn for `s` (fuzz_output.limit) and holds for both
    twins = [t for t in b.streams.values() if _alike(s, t) and t.merged == s.merged]
    twin = b.draw(st.sampled_from(twins))
    if kind == "join":
        if s.event_time is None:
            return False
        other = b.draw(st.sampled_from([t for t in b.streams.values() if t.event_time]))
        template, order = limit_join(b, *join_select(b, s, other))
        texts = [_fill(template, left=x.name, right=other.name) for x in (s, twin)]
        reads = [s.name, twin.name, other.name]
    else:
        made = ONE_INPUT[kind](b, s)
        if made is None:
            return False
        template, order = limit(b, s, kind, *made)
        texts = [_fill(template, src=x.name) for x in (s, twin)]
        reads = [s.name, twin.name]
    outs = [b.fresh(kind[0]) for _ in texts]
    for out, text in zip(outs, texts, strict=True):
        b.stmts.append(f"INSERT INTO {out} {text}")
    b.read.update(reads)
    graph = b.compile()
    for out in outs:
        b.learn(graph, out, order, kind, s.merged or twin.merged)
    _union(b, b.streams[outs[0]], b.streams[outs[1]])
    return True


# ---- tables ---------------------------------------------------------------------------------------------


def _type_text(kind: str, precision: int | None, scale: int | None) -> str:
    if kind == "null":  # a bare NULL item: any column takes it
        return "varchar"
    return f"decimal({precision}, {scale or 0})" if kind == "decimal" else kind


def materialize(b: Builder, select: str, keys: list[str], source: str) -> None:
    shape = b.schema_of(select)
    table = b.fresh("t")
    cols = [f"{n} {_type_text(k, p, sc)}" for n, k, p, sc in shape.fields]
    # a key refuses the rows whose key is NULL (the tail of most inputs)
    keyed = keys and (b.forced("table row") or b.draw(st.integers(0, 3)) > 0)
    key = f", PRIMARY KEY ({', '.join(keys)})" if keyed else ""
    b.decls.append(f"CREATE TABLE {table} ({', '.join(cols)}{key}) IN db")
    b.written.append(table)
    b.stmts.append(f"INSERT INTO TABLE {table} {select}")
    b.read.add(source)
    b.compile()


def materialize_window(b: Builder, s: Stream) -> bool:
    """INSERT INTO TABLE of a window's rows over `s`, keyed by its group when it has one."""
    template, keys = aggregate_select(b, s)
    materialize(b, _fill(template, src=s.name), keys or [], s.name)
    return True


def materialize_stream(b: Builder, s: Stream) -> bool:
    """INSERT INTO TABLE of `s` keyed by `k`, whose NULL keys the table refuses (a table row's
    failure path)."""
    if "k" not in s.names(INT):
        return False
    items = ", ".join(n for n in s.names() if n != s.event_time or b.draw(st.booleans()))
    materialize(b, f"SELECT {items} FROM {s.name}{_where(b, s, 3)}", ["k"], s.name)
    return True


def table(b: Builder) -> bool:
    if not b.store:
        return False
    if b.draw(st.booleans()):
        return materialize_window(b, b.pick(lambda s: not s.merged))
    candidates = [s for s in b.streams.values() if "k" in s.names(INT) and not s.merged]
    return bool(candidates) and materialize_stream(b, b.draw(st.sampled_from(candidates)))


STATEMENTS: dict[str, Any] = {
    "map": lambda b: one_input(b, "map"),
    "filter": lambda b: one_input(b, "filter"),
    "multifilter": multifilter,
    "aggregate": lambda b: one_input(b, "aggregate"),
    "read": lambda b: one_input(b, "read"),
    "write": lambda b: one_input(b, "write"),
    "join": join,
    "union": union,
    "twins": twins,
    "table": table,
    "pattern": pattern,
}
