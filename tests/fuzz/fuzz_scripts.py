"""Valid CPL scripts for the differential fuzzer, statement by statement.

`cases()` draws a whole `Case`: one or two source streams (with or without event time and a
WATERMARK in any unit, 0 written out included), in one case in five one or two triggers and the
clock they tick on (fuzz_triggers), then one to five statements, each reading streams
declared or produced before it, the latest more often (so that statements chain): the statements
of fuzz_statements (every operator over every upstream the language allows, windows of
fuzz_windows, expressions that fail on some events at every position), and inputs where a whole
stream may deliver nothing. After each statement the script so far is
compiled, and the compiled schema of the new stream (types as the compiler derives them) is what
the next statements draw their expressions from; so every script the generator returns compiles,
and one that does not is a bug of the generator or of the compiler (`GeneratorError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuzz_aims import aim, needs_store
from fuzz_case import Case, StoreTable
from fuzz_coverage import MERGING, RELEASED, SHARING, Row
from fuzz_exprs import Draw, Field, at, category, expr, failing
from fuzz_inputs import records, split, spread
from fuzz_queries import STORE_TABLES
from fuzz_statements import STATEMENTS
from fuzz_triggers import declare_triggers, first_read
from hypothesis import strategies as st

from cpl.compiler import compile_script
from cpl.errors import CompileError
from operators import graph as g
from operators.analysis import out_of_time_order


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
    # what produced it: source, trigger, map, filter, union, aggregate, join, read, write, pattern
    kind: str = "source"
    # an untimed merge (a Union without event time) is upstream: how its inputs interleave is the
    # order they reach it, which is each engine's own (docs/language.md, "Merges"), so no statement
    # whose result depends on order (a TUPLE or BATCH window, an OUTPUT limit, a keyed table, an
    # UpdateSQL) reads it; nor a pattern's rows with PARTITION BY that have no time: such a reader
    # reads them in time order (docs/language.md, "Patterns"), and refuses them without one
    merged: bool = False
    # its rows come out of time order on Spark (a join's, a pattern's with PARTITION BY: operators.
    # analysis.out_of_time_order): what depends on their order reads them in time order, and loses
    # their event time on the way (docs/language.md, "Rows out of time order")
    unordered: bool = False
    delayed: bool = False  # a source with a WATERMARK delay (fuzz_aims.aim_holding)

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
# WATERMARK: none, the default written out, and delays in several units
WATERMARKS = [
    "",
    "",
    " WATERMARK 0 SECONDS",
    " WATERMARK 5 SECONDS",
    " WATERMARK 1 MINUTE",
    " WATERMARK 1500 ms",
]


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
        self.windows: dict[str, str] = {}  # CREATE WINDOW name -> its spec
        self.read: set[str] = set()  # the streams some statement reads
        self.n = 0
        # Aiming at one (operator, upstream, position) of the coverage table (fuzz_coverage): the
        # next statement reads `next_input`, uses a window of `window_kind`, and draws an
        # expression that fails on some events at the position `force`.
        self.force: str | None = None
        self.window_kind: str | None = None
        self.next_input: str | None = None
        # the next pattern reads `next_input` alone (fuzz_aims.aim_sharing)
        self.single_input = False
        # the next Map drops its input's event time (fuzz_aims.aim_released)
        self.drop_time = False
        # Aiming at an OutputRate line of the table (fuzz_output): the next statement's OUTPUT form.
        self.output: Row | None = None
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

    def add(self, stmt: str, outputs: dict[str, list[str] | None], reads: list[str], kind: str) -> None:
        """Append an INSERT reading `reads` and learn its outputs' schemas."""
        self.stmts.append(stmt)
        self.read.update(reads)
        graph = self.compile()
        for name, order in outputs.items():
            self.learn(graph, name, order, kind, any(self.streams[r].merged for r in reads))

    def learn(
        self, graph: g.Graph, name: str, order: list[str] | None, kind: str, merged: bool = False
    ) -> None:
        s = self.streams[name] = stream_of(graph, name, order, kind=kind)
        s.unordered = out_of_time_order(graph, graph.streams[name]) is not None
        s.merged = merged or (s.event_time is None and s.unordered)

    def schema_of(self, select: str) -> Stream:
        """The schema a SELECT would produce, without keeping it."""
        graph = self.compile([f"INSERT INTO probe__ {select}"])
        return stream_of(graph, "probe__", None)

    def source(self, name: str, fields: list[tuple[str, str]], timed: bool, delayed: bool = False) -> None:
        """CREATE STREAMSCHEMA name: its fields, and with `timed` event time (with `delayed`, a
        WATERMARK delay)."""
        cols = ", ".join(f"{n} {t}" for n, t in fields)
        if timed:
            marks = [w for w in WATERMARKS if w and " 0 " not in w] if delayed else WATERMARKS
            cols += f", ts timestamp TIMESTAMP BY ts{self.draw(st.sampled_from(marks))}"
        self.decls.append(f"CREATE STREAMSCHEMA {name} WITH k integer, {cols}")
        graph = compile_script(self.script(["INSERT INTO probe__ SELECT * FROM " + name])).graph
        self.streams[name] = stream_of(graph, name, [], source=True)  # its events keep their order
        self.streams[name].delayed = any(s.stream == name and s.watermark_ms for s in graph.sources())

    def trigger(self, name: str, at: str) -> None:
        """CREATE TRIGGER name AT ...: a stream of one field, `triggered_time`, its event time, whose
        events the engine makes (no input files; fuzz_triggers)."""
        self.decls.append(f"CREATE TRIGGER {name} AT {at}")
        graph = compile_script(self.script(["INSERT INTO probe__ SELECT * FROM " + name])).graph
        self.streams[name] = stream_of(graph, name, [], kind="trigger")  # its ticks come in order

    def need_table(self, name: str) -> None:
        self.tables.setdefault(name, STORE_TABLES[name])

    def declare_query(self, name: str, text: str, returns: str) -> None:
        if name not in self.queries:
            self.queries.add(name)
            self.decls.append(f"CREATE SQLQUERY {name} ON db AS '{text}' {returns}".rstrip())

    def window(self, spec: str) -> str:
        """What follows WINDOW: `spec` in place, or the name of a window declared with it (a new
        CREATE WINDOW, or one made before with the same spec)."""
        if self.draw(st.integers(0, 2)) > 0:
            return spec
        same = [name for name, text in self.windows.items() if text == spec]
        if same and self.draw(st.booleans()):
            chosen: str = self.draw(st.sampled_from(same))
            return chosen
        name = self.fresh("w")
        self.windows[name] = spec
        self.decls.append(f"CREATE WINDOW {name} AS {spec}")
        return name

    def at(self, cat: str, fields: list[Field], depth: int, position: str) -> str:
        """An expression for `position`: one that fails on some events when it is aimed at."""
        if self.force == position:
            return failing(self.draw, cat, fields)
        if self.force is not None:  # aimed elsewhere: nothing drawn to fail before it
            return expr(self.draw, cat, fields, min(depth, 1))
        return at(self.draw, cat, fields, depth)

    def forced(self, position: str) -> bool:
        return self.force == position

    def pick(self, pred: Any = None) -> Stream:
        """A stream to read, the most recent one more often than the others: so that statements
        chain (an aggregate over a join over a Union ...) as often as they branch."""
        if self.next_input is not None and (pred is None or pred(self.streams[self.next_input])):
            return self.streams[self.next_input]
        options = [s for s in self.streams.values() if pred is None or pred(s)]
        if len(options) > 1 and self.draw(st.booleans()):
            return options[-1]
        chosen: Stream = self.draw(st.sampled_from(options))
        return chosen


def stream_of(
    graph: g.Graph, name: str, order: list[str] | None, source: bool = False, kind: str = "source"
) -> Stream:
    """What the compiled graph says of stream `name` (a statement's output unless `source`: a
    SELECT * may compile to no node of its own, its stream then being its input's port)."""
    port = graph.streams[name]
    node = graph.node(port.node)
    fields = [(f.name, f.type.kind, f.type.precision, f.type.scale) for f in node.schema]
    event_time = getattr(node, "event_time", None)
    return Stream(name, fields, event_time, source, order, kind)


SPREAD = 0  # `max_files`' draw for a case whose inputs are spread (fuzz_inputs.spread)


def _input(draw: Draw, s: Stream, aimed: bool = False) -> list[list[str]]:
    """A source's files. One stream in ten delivers no event at all: no file, empty files, or only
    records it must reject (a merge must not wait for it at the end; a join gets no pair)."""
    if not aimed and draw(st.integers(0, 9)) == 0:
        form = draw(st.integers(0, 2))
        if form == 0:
            return []
        if form == 1:
            return [[] for _ in range(draw(st.integers(1, 2)))]
        return [["{not json"], ['{"k": "abc"}']]
    # a case aimed at a failure path has more events, so that one reaches it in the state it needs
    return split(
        draw, records(draw, s.fields, s.event_time, draw(st.integers(1, 30 if aimed else 14)), aimed)
    )


@st.composite
def cases(
    draw: Draw,
    stores: tuple[str | None, ...] = (None, "sqlite", "postgresql"),
    targets: tuple[Row, ...] = (),
) -> Case:
    """A whole case: script, inputs, store, and Spark's micro-batch size; aimed at one of `targets`
    (lines of the coverage table, fuzz_aims) when there are any."""
    target = draw(st.sampled_from(targets)) if targets else None
    needed = needs_store(target) if target else None
    usable = [s for s in stores if s is not None and needed in ("any", s)] if needed else list(stores)
    store = draw(st.sampled_from(usable or list(stores)))
    b = Builder(draw, {"sqlite": "sqlite", "postgresql": "postgresql"}.get(store or ""))
    # declared before the sources, so that a statement reads the latest source more often than them
    clock = declare_triggers(b, target)
    fields = draw(st.lists(st.sampled_from(SOURCE_FIELDS), min_size=1, max_size=4, unique=True))
    merging = target is not None and target[0] == MERGING  # two sources with event time, alike
    sharing = target is not None and target[0] == SHARING  # patterns over a source with event time
    released = target is not None and target[0] == RELEASED  # a source with a WATERMARK delay
    timed = merging or sharing or released or draw(st.integers(0, 4)) > 0
    b.source("s1", fields, timed, delayed=released)
    if merging or draw(st.booleans()):
        same = merging or draw(st.booleans())
        other = (
            fields
            if same
            else draw(st.lists(st.sampled_from(SOURCE_FIELDS), min_size=1, max_size=3, unique=True))
        )
        b.source("s2", other, timed if same else draw(st.booleans()))
    aimed = target is not None and aim(b, target)
    if clock and not aimed:
        first_read(b)
    for _ in range(draw(st.integers(0 if aimed else 1, 3 if aimed else 5))):
        kind = draw(st.sampled_from(sorted(STATEMENTS)))
        if not STATEMENTS[kind](b):
            STATEMENTS["map"](b)
    inputs = {s.name: _input(draw, s, aimed) for s in b.streams.values() if s.source}
    # Every stream no statement reads, and some of the others: each sink is a streaming query on
    # Spark (stateless ones share one), the largest cost of a case.
    read = b.read
    sinks = [
        s.name for s in b.streams.values() if not s.source and (s.name not in read or draw(st.booleans()))
    ]
    ordered = {s.name: s.order for s in b.streams.values() if not s.source and s.order is not None}
    # Files per micro-batch; or all in one, spread over more files than two partitions hold, which
    # Spark's tasks run side by side (an UpdateSQL ran its statements in the order the tasks reached
    # the store). One draw, as before that form: tests count on their seeds' luck.
    max_files = draw(st.sampled_from([None, 1, 2, SPREAD]))
    if max_files == SPREAD:
        inputs = {name: spread(files) for name, files in inputs.items()}
        max_files = None
    return Case(
        script=b.script(),
        inputs=inputs,
        sinks=sinks,
        store=store,
        tables=list(b.tables.values()),
        compare_tables=list(b.written),
        max_files=max_files,
        ordered=ordered,
        mtimes=draw(st.sampled_from(["increasing", "equal", "reversed"])),
        partitions=draw(st.sampled_from([1, 2])),
        trigger_clock=clock,
    )
