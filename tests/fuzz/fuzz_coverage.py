"""What the differential fuzzer has exercised: per operator, the kind of statement it reads (its
upstream) and the place where it evaluates an expression, how many cases had it and in how many an
expression there actually failed on the reference executor (an event, a window's row or a pair
dead-lettered from that place). A soak prints the table at its end, so that a gap shows as a zero.

Each OUTPUT clause (docs/language.md, "Output rate limiting") is a line of its own too: its form
(`OutputRate LAST EVERY n EVENTS`, `OutputRate FIRST EVERY duration`, `OutputRate SNAPSHOT`), the
statement whose rows it limits (a stateless one, an aggregate, a pattern, a join; `window's
processor` for an ALL or LAST by time over a TUPLE or BATCH window that Spark's window processor
holds itself: deployer.spark.output.placement.in_window_processor; `window's aggregation` for one
over a TIME window that Spark's window aggregation holds itself, keyed by the limit's bucket:
in_window_aggregation) in the upstream column, and whether it limits per group (`per group`, with a GROUP BY) or not (`-`); it evaluates
no expression of its own, so only its cases count. So is each kind of trigger (`Trigger EVERY`,
`Trigger START`, `Trigger cron`), by the kind of statement that reads its ticks (a Map or Filter, a
window, an `ON SQL` call, a Union with events, a join, a pattern) in the upstream column; and each
source with a WATERMARK delay, and the sources that meet in a merge, by whether Spark holds their
events back in a Sequencer or not (`held`, `unheld`: deployer.spark.run.held); and the sinks of
patterns over the same source streams, alone in the query they have on Spark or beside others.

Everything is read off what ran: the compiled graph says what each case has, and each of the
reference's dead letters is traced to its place by evaluating that node's expressions, in the order
the reference does, on the dead-lettered event until one fails with the same reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cpl.compiler import compile_script
from deployer.connectors.records import to_event
from deployer.evaluation.evaluate import compile_expr
from deployer.local.runtime import EVAL_ERRORS
from deployer.spark.output.placement import in_window_aggregation, in_window_processor
from deployer.spark.run import held
from deployer.spark.run.pattern_groups import pattern_groups
from deployer.spark.run.queries import sequenced_merges
from operators import expr as ir
from operators import graph as g
from operators import patterns as pt
from operators.analysis import in_release_order
from operators.datatypes import Schema
from operators.output_node import OutputRate

Row = tuple[str, str, str]  # (operator, upstream, position)

# The upstream kinds: what produced the stream a statement reads (a statement is named by the
# node that defines it, in this order of precedence).
UPSTREAMS = ("source", "map", "filter", "union", "aggregate", "join", "read", "write", "pattern")
# the streams with event time (a pattern's when it selects its match time)
_TIMED = ("source", "map", "filter", "union", "join", "read", "write", "pattern")
POSITIONS: dict[str, tuple[str, ...]] = {
    "Filter": ("WHERE",),
    "MultiFilter": ("WHERE",),
    "Map": ("SELECT",),
    "Union": ("-",),
    "Aggregate TIME": ("GROUP BY", "argument", "HAVING", "SELECT"),
    "Aggregate TUPLE": ("GROUP BY", "argument", "HAVING", "SELECT"),
    "Aggregate BATCH": ("GROUP BY", "argument", "START", "STOP", "HAVING", "SELECT"),
    "Join": ("condition", "SELECT"),
    "ReadSQL": ("ON SQL",),
    "UpdateSQL": ("ON SQL",),
    "Materialize": ("table row",),
    "Pattern": ("condition", "WHERE", "SELECT"),
}
# What each operator can read: a TIME window and a join need event time, which an aggregate's rows
# do not have.
READS = {op: _TIMED if op in ("Aggregate TIME", "Join", "Pattern") else UPSTREAMS for op in POSITIONS}
# The OUTPUT clauses: (form, the statement it limits, with a GROUP BY or not). SNAPSHOT needs a
# windowed aggregate; a join has no GROUP BY.
OUTPUT_FORMS = (
    "ALL EVERY n EVENTS",
    "FIRST EVERY n EVENTS",
    "LAST EVERY n EVENTS",
    "ALL EVERY duration",
    "FIRST EVERY duration",
    "LAST EVERY duration",
    "SNAPSHOT",
)
IN_PROCESSOR = "window's processor"
IN_AGGREGATION = "window's aggregation"
HELD = (IN_PROCESSOR, IN_AGGREGATION)  # by a window's own state: ALL and LAST by time only
LIMITED = ("stateless", "aggregate", IN_PROCESSOR, IN_AGGREGATION, "pattern", "join")
GROUPED = "per group"
OUTPUT_ROWS: tuple[Row, ...] = tuple(
    (f"OutputRate {form}", up, pos)
    for form in OUTPUT_FORMS
    for up in LIMITED
    for pos in ("-", GROUPED)
    if (form != "SNAPSHOT" or up == "aggregate")
    and (up != "join" or pos == "-")
    and (up not in HELD or form in ("ALL EVERY duration", "LAST EVERY duration"))
)
# The triggers (CREATE TRIGGER): each kind, by the statement that reads its ticks (directly or
# through other statements): a Map or Filter, a window, a data store call, a Union that merges them
# with a stream of events (from files), a join, a pattern.
TRIGGER_KINDS = {"every": "EVERY", "start": "START", "cron": "cron"}
TRIGGER_READERS = ("stateless", "window", "ON SQL", "merge", "join", "pattern")
TRIGGER_ROWS: tuple[Row, ...] = tuple(
    (f"Trigger {kind}", reader, "-") for kind in TRIGGER_KINDS.values() for reader in TRIGGER_READERS
)
# A stream with a WATERMARK delay read from files, by whether Spark holds its events back in a
# Sequencer (`held`) or lets them reach the TIME windows that alone read it as they arrive
# (`unheld`: deployer.spark.run.held).
HOLDING = "Source with a WATERMARK delay"
HOLDING_ROWS: tuple[Row, ...] = ((HOLDING, "held", "-"), (HOLDING, "unheld", "-"))
# Source streams with event time that meet in a merge, read from files, by whether Spark holds them
# back together (`held`: deployer.spark.streams.merge_sequencer) or lets them reach the TIME windows
# that alone read their Union as they arrive (`unheld`: deployer.spark.run.held).
MERGING = "Sources that meet in a merge"
MERGING_ROWS: tuple[Row, ...] = ((MERGING, "held", "-"), (MERGING, "unheld", "-"))
# The sinks of patterns over the same source streams, which share one query on Spark (deployer.
# spark.run.pattern_groups): a pattern's sink alone in its query, or beside others.
SHARING = "Pattern sinks in one query"
SHARING_ROWS: tuple[Row, ...] = ((SHARING, "alone", "-"), (SHARING, "beside others", "-"))
# The rows of a stream with a WATERMARK delay after a SELECT that dropped their event time, by what
# takes them in the order the stream released them (event time, then arrival), which their `SEQ`
# alone does not say on Spark (deployer.spark.translate.stateless.map_in_release_order): a TUPLE or
# BATCH window, an OUTPUT limit.
RELEASED = "Delayed rows without their event time"
RELEASED_ROWS: tuple[Row, ...] = ((RELEASED, "TUPLE or BATCH window", "-"), (RELEASED, "OUTPUT limit", "-"))
NO_EXPRESSION = ("-", GROUPED)  # positions that evaluate nothing: only their cases count


def holding_rows(graph: g.Graph, sinks: Sequence[str]) -> set[Row]:
    """The HOLDING_ROWS and MERGING_ROWS of a case whose streams `sinks` are bound to sinks."""
    files = {s.stream: "file:in" for s in graph.sources()}
    unheld = set(held.unheld(graph, files, sinks))
    merged = {s for merge in sequenced_merges(graph, files) for s in merge}
    return {
        (HOLDING, "unheld" if s.stream.lower() in unheld else "held", "-")
        for s in graph.sources()
        if s.event_time is not None and s.watermark_ms and s.trigger is None and s.stream not in merged
    } | {(MERGING, "unheld" if s.lower() in unheld else "held", "-") for s in merged}


def sharing_rows(graph: g.Graph, sinks: Sequence[str]) -> set[Row]:
    """The SHARING_ROWS of a case whose streams `sinks` are bound to sinks."""
    groups = pattern_groups(graph, [s for s in graph.streams if s in sinks])
    return {(SHARING, "alone" if len(members) == 1 else "beside others", "-") for _, members in groups}


def released_rows(graph: g.Graph) -> set[Row]:
    """The RELEASED_ROWS of a case: a TUPLE or BATCH window, or an OUTPUT limit not held by a window,
    reading a delayed stream's released rows whose event time a SELECT dropped."""
    out: set[Row] = set()
    for node in graph.nodes:
        if isinstance(node, g.Aggregate) and node.window.kind in ("tuple", "batch"):
            reader = RELEASED_ROWS[0]
        elif isinstance(node, OutputRate) and not isinstance(graph.node(node.inputs[0].node), g.Aggregate):
            reader = RELEASED_ROWS[1]
        else:
            continue
        if in_release_order(graph, node.inputs[0]) and _time_dropped(graph, node.inputs[0]):
            out.add(reader)
    return out


def _time_dropped(graph: g.Graph, port: g.Port) -> bool:
    """Whether a Map between `port` and the row-by-row operators' source dropped the event time."""
    node = graph.node(port.node)
    while isinstance(node, g.Map | g.Filter | g.MultiFilter | g.ReadSQL | g.UpdateSQL):
        if isinstance(node, g.Map) and node.event_time is None:
            return True
        node = graph.node(node.inputs[0].node)
    return False


def operator(node: g.Node) -> str | None:
    if isinstance(node, g.Aggregate):
        return f"Aggregate {node.window.kind.upper()}"
    name = type(node).__name__
    return name if name in POSITIONS else None


def output_row(graph: g.Graph, node: OutputRate) -> Row:
    """The OUTPUT clause's line (OUTPUT_ROWS)."""
    every = "n EVENTS" if node.every_events is not None else "duration"
    form = "SNAPSHOT" if node.kind == "snapshot" else f"{node.kind.upper()} EVERY {every}"
    producer = graph.node(node.inputs[0].node)
    limited = {g.Aggregate: "aggregate", g.Pattern: "pattern", g.Join: "join"}.get(
        type(producer), "stateless"
    )
    if in_window_processor(graph, node):
        limited = IN_PROCESSOR
    elif in_window_aggregation(graph, node):
        limited = IN_AGGREGATION
    return (f"OutputRate {form}", limited, GROUPED if node.group_by else "-")


def _reader(nodes: set[type[g.Node]]) -> str | None:
    """What a statement made of `nodes` is to a trigger it reads (TRIGGER_READERS)."""
    for reader, classes in (
        ("pattern", (g.Pattern,)),
        ("window", (g.Aggregate,)),
        ("join", (g.Join,)),
        ("ON SQL", (g.ReadSQL, g.UpdateSQL)),
        ("merge", (g.Union,)),
        ("stateless", (g.Map, g.Filter, g.MultiFilter)),
    ):
        if nodes & set(classes):
            return reader
    return None


def trigger_rows(graph: g.Graph) -> set[Row]:
    """The TRIGGER_ROWS of a case: each statement that reads a trigger's ticks, by its kind; a Union
    counts only when it merges them with events from files."""
    kinds = {
        n.id: TRIGGER_KINDS[n.trigger.kind] for n in graph.nodes if isinstance(n, g.Source) and n.trigger
    }
    if not kinds:
        return set()
    roots: dict[str, frozenset[str]] = {}

    def sources(node_id: str) -> frozenset[str]:  # the Source nodes upstream of a node
        if node_id not in roots:
            node = graph.node(node_id)
            ups = [sources(p.node) for p in node.inputs]
            roots[node_id] = frozenset({node_id}) if isinstance(node, g.Source) else frozenset().union(*ups)
        return roots[node_id]

    lines: dict[int, list[g.Node]] = {}
    for n in graph.nodes:
        if not isinstance(n, g.Source | g.Sink):
            lines.setdefault(n.line, []).append(n)
    out: set[Row] = set()
    for nodes in lines.values():
        reader = _reader({type(n) for n in nodes})
        read = frozenset().union(*(sources(p.node) for n in nodes for p in n.inputs))
        if reader is None or (reader == "merge" and not read - kinds.keys()):
            continue
        out |= {(f"Trigger {kinds[t]}", reader, "-") for t in read & kinds.keys()}
    return out


def _statement_kind(graph: g.Graph, line: int, besides: type[g.Node] = g.Sink) -> str:
    nodes = {type(n) for n in graph.nodes if n.line == line and not isinstance(n, g.Sink | besides)}
    for kind, cls in (
        ("source", g.Source),
        ("pattern", g.Pattern),
        ("aggregate", g.Aggregate),
        ("join", g.Join),
        ("read", g.ReadSQL),
        ("write", g.UpdateSQL),
        ("union", g.Union),
        ("map", g.Map),
    ):
        if cls in nodes:
            return kind
    return "filter"


def upstreams(graph: g.Graph, node: g.Node) -> set[str]:
    """The kinds of the statements `node` reads: each input followed back to the first node of an
    earlier statement."""
    out = set()
    for port in node.inputs:
        up = graph.node(port.node)
        while up.line == node.line and up.inputs and not isinstance(up, g.Source):
            up = graph.node(up.inputs[0].node)
        out.add(_statement_kind(graph, up.line) if up.line != node.line else "source")
    return out


def positions(node: g.Node) -> list[tuple[str, list[ir.Expr]]]:
    """The places where `node` evaluates expressions, in the reference's order, with them."""
    if isinstance(node, g.Filter):
        return [("WHERE", [node.predicate])]
    if isinstance(node, g.MultiFilter):
        return [("WHERE", list(node.predicates))]
    if isinstance(node, g.Map):
        return [("SELECT", [p.expr for p in node.projections])]
    if isinstance(node, g.Aggregate):
        args = [a.expr.arg for a in node.aggs if isinstance(a.expr, ir.Agg) and a.expr.arg is not None]
        out = [("GROUP BY", [k.expr for k in node.keys]), ("argument", args)]
        w = node.window
        if w.start is not None and w.stop is not None:
            out += [("START", [w.start]), ("STOP", [w.stop])]
        out += [("HAVING", [node.having] if node.having is not None else [])]
        return [*out, ("SELECT", [p.expr for p in node.projections])]
    if isinstance(node, g.Join):
        return [("condition", [node.predicate]), ("SELECT", [p.expr for p in node.projections])]
    if isinstance(node, g.ReadSQL | g.UpdateSQL):
        return [("ON SQL", [])]
    if isinstance(node, g.Pattern):
        conditions = [c.expr for c in pattern_conditions(node.automaton)]
        where = [node.where] if node.where is not None else []
        return [("condition", conditions), ("WHERE", where), ("SELECT", [p.expr for p in node.projections])]
    if isinstance(node, g.Materialize):
        return [("table row", [])]
    return [("-", [])]


def _raises(e: ir.Expr, value: Any, reason: str, paired: bool = False) -> bool:
    try:
        compile_expr(e, paired=paired)(value)
    except EVAL_ERRORS as err:
        return (str(err) or type(err).__name__) == reason
    return False


def _typed(values: Sequence[Any], schema: Schema) -> tuple[Any, ...]:
    return to_event({f.name: v for f, v in zip(schema, values, strict=False)}, schema)


def place(node: g.Node, reason: str, event: Sequence[Any] | None) -> list[str]:
    """Where in `node` a dead letter (its reason, the event as written) failed: one place, or two
    that both fail alike on it (a BATCH window's START and STOP, whose state is not known here)."""
    places = positions(node)
    if len(places) == 1 or event is None:
        return [places[0][0]]
    try:
        if isinstance(node, g.Pattern):
            return _pattern_place(node, places, reason, event)
        if isinstance(node, g.Join):
            left = _typed(event[: len(node.left_schema)], node.left_schema)
            right = _typed(event[len(node.left_schema) :], node.right_schema)
            return [p for p, es in places if any(_raises(e, (left, right), reason, True) for e in es)][:1]
        assert isinstance(node, g.Aggregate)
        if "overflow: " in reason and reason.split("overflow: ", 1)[1].startswith(("sum(", "avg(")):
            return ["argument"]  # the aggregate itself overflowed its type, over a window
        if len(event) == len(node.input_schema):
            try:  # an input event's, or a window's row of as many fields
                typed = _typed(event, node.input_schema)
                found = [p for p, es in places[:-2] if any(_raises(e, typed, reason) for e in es)]
            except Exception:
                found = []
            if found:
                return found if set(found) == {"START", "STOP"} else found[:1]
        typed = _typed(event, node.row_schema)
        return [p for p, es in places[-2:] if any(_raises(e, typed, reason) for e in es)][:1]
    except Exception:
        return ["?"]


def pattern_conditions(automaton: pt.Automaton) -> list[pt.Condition]:
    out = []
    for state in automaton.states:
        e = state.element
        for side in (e.left, e.right) if isinstance(e, pt.Logical) else (e,):
            if side.condition is not None:
                out.append(side.condition)
    return out


def _pattern_place(
    node: g.Pattern, places: list[tuple[str, list[ir.Expr]]], reason: str, event: Sequence[Any]
) -> list[str]:
    """A match row's dead letter failed in the WHERE or a SELECT item (evaluated again on it); an
    input event's, in a condition (which reads values of the partial, not known here)."""
    if len(event) == len(node.row_schema):
        try:
            typed = _typed(event, node.row_schema)
            found = [p for p, es in places[1:] if any(_raises(e, typed, reason) for e in es)]
        except Exception:
            found = []
        if found:
            return found[:1]
    return ["condition"]


@dataclass
class Coverage:
    """The counts of a run of the fuzzer (see the module docstring)."""

    cases: int = 0
    had: Counter[Row] = field(default_factory=Counter)
    failed: Counter[Row] = field(default_factory=Counter)
    sources_silent: int = 0  # cases where a source stream delivered no event

    def add(
        self, script: str, dead: Iterable[dict[str, Any]], silent: bool, sinks: Sequence[str] = ()
    ) -> None:
        graph = compile_script(script).graph
        self.cases += 1
        self.sources_silent += silent
        had: set[Row] = trigger_rows(graph) | holding_rows(graph, sinks) | sharing_rows(graph, sinks)
        had |= released_rows(graph)
        for node in graph.nodes:
            if isinstance(node, OutputRate):
                had.add(output_row(graph, node))
            op = operator(node)
            if op is None:
                continue
            for up in self._ups(graph, node):
                had |= {(op, up, p) for p, es in positions(node) if es or p in ("-", "ON SQL", "table row")}
        failed: set[Row] = set()
        for d in dead:
            node = next((n for n in graph.nodes if n.id == d.get("node")), None)
            op = operator(node) if node is not None else None
            if node is None or op is None or d.get("stage") in ("input", "late"):
                continue
            for p in place(node, str(d.get("reason")), d.get("event")):
                failed |= {(op, up, p) for up in self._ups(graph, node)}
        self.had.update(had)
        self.failed.update(failed)

    @staticmethod
    def _ups(graph: g.Graph, node: g.Node) -> set[str]:
        # a table is written what its own statement makes when that is a window's rows, a join's
        # pairs or a store call's results, else the events of the stream it reads
        if isinstance(node, g.Materialize):
            own = _statement_kind(graph, node.line, besides=g.Materialize)
            if own in ("aggregate", "join", "read", "write"):
                return {own}
        return upstreams(graph, node)

    def expected(self) -> list[Row]:
        rows = [(op, up, p) for op, ps in POSITIONS.items() for up in READS[op] for p in ps]
        rows += list(OUTPUT_ROWS) + list(TRIGGER_ROWS) + list(HOLDING_ROWS) + list(MERGING_ROWS)
        return rows + list(SHARING_ROWS) + list(RELEASED_ROWS)

    def gaps(self) -> tuple[Row, ...]:
        """The lines with a zero: never had, or (where an expression is evaluated) never failed."""
        return tuple(
            r
            for r in self.expected()
            if self.had[r] == 0 or (r[2] not in NO_EXPRESSION and self.failed[r] == 0)
        )

    def table(self) -> str:
        """One line per (operator, upstream, position) the language allows, with the cases that had
        it and those where an expression there failed; a zero is a gap."""
        expected = self.expected()
        rows = expected + sorted(set(self.had) - set(expected))
        width = max(len(f"{op} / {up} / {p}") for op, up, p in rows)
        lines = [
            f"coverage over {self.cases} cases ({self.sources_silent} with a source that delivered nothing):",
            f"  {'operator / upstream / position':<{width}}  cases  failed",
        ]
        for op, up, p in rows:
            fails = "-" if p in NO_EXPRESSION else str(self.failed[(op, up, p)])
            lines.append(f"  {f'{op} / {up} / {p}':<{width}}  {self.had[(op, up, p)]:5d}  {fails:>6}")
        lines.append(f"  {len(self.gaps())} of {len(expected)} lines with a zero")
        return "\n".join(lines)


Recorder = Callable[[str, Iterable[dict[str, Any]], bool], None]
