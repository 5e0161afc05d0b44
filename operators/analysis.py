"""Questions about an operator graph that every engine and the tools ask, answered from the IR alone.

Nothing here runs an operator or imports an engine: the answers depend on the graph only, so the
Spark translation, the checkpoint rules, `cep explain` and the tests (without a JVM) all get the same
ones. What each function answers:

- `ancestors`: a node and everything upstream of it, in plan order;
- `stateless_upstream`: whether a node is computed from the sources by stateless operators only;
- `in_release_order`: whether a port's rows are a delayed stream's events, in the order it
  released them, through row-by-row operators, ReadSQLs and UpdateSQLs only;
- `from_timed_merge`: whether a port's rows are a merge's with event time, through row-by-row
  operators;
- `out_of_time_order`: the pattern with PARTITION BY or the join whose rows reach a port out of
  time order on Spark, if any; `partition_keyed`: whether a field is a pattern's partition key;
- `merged_sources`: which source streams with event time meet in a merge (a Union);
  `self_merged_sources`: the streams a merge reads through two of its inputs;
- `can_fail`: whether evaluating an expression may fail for some event (its event is then
  dead-lettered, so every field of it must be kept);
- `unfit_results`: which result fields of a ReadSQL may receive a value that does not fit them,
  which dead-letters its event; `vouched_results`: those its store vouched for, where such a value
  stops the run (the column's type changed since the script was compiled);
- `can_overflow`: whether an aggregate's value may not fit its type (its window's row is then
  dead-lettered);
- `live_fields`: which fields of each port some consumer reads.
"""

from __future__ import annotations

from collections.abc import Callable

from operators import decimals
from operators import expr as ir
from operators import graph as g
from operators.patterns import Logical, Ref, Step

# Operators that keep no state and call no data store.
STATELESS = (g.Source, g.Map, g.Filter, g.MultiFilter, g.Union)


def ancestors(graph: g.Graph, node_id: str) -> list[g.Node]:
    """`node_id` and every node upstream of it, in plan order."""
    wanted = {node_id}
    out: list[g.Node] = []
    for n in reversed(graph.nodes):
        if n.id in wanted:
            out.append(n)
            wanted.update(p.node for p in n.inputs)
    return list(reversed(out))


def stateless_upstream(graph: g.Graph, node: g.Node, on_input: bool = False) -> bool:
    """Whether `node` (its inputs, with `on_input`) is computed from the sources by stateless
    operators only: no window, join or data store on the way."""
    todo = [graph.node(p.node) for p in node.inputs] if on_input else [node]
    while todo:
        n = todo.pop()
        if not isinstance(n, STATELESS):
            return False
        todo.extend(graph.node(p.node) for p in n.inputs)
    return True


def in_release_order(graph: g.Graph, port: g.Port) -> bool:
    """Whether the rows at `port` come, as they come, in the order a stream with a WATERMARK delay
    released them (event time, then arrival: the reference's), an order the row's `SEQ` (arrival)
    does not give back once a SELECT dropped the event time (found by the fuzzer, seeds 16016 and
    2234, and probing 2234): what writes or updates such rows takes them as they come. They are the
    stream's events through row-by-row operators (a ReadSQL's results in its events' order, each
    event's in the store's) and UpdateSQLs, which run a micro-batch's statements in that order, in
    one partition, and pass their events on so (deployer.spark.datastores.sql). The stream's
    Sequencer, whose key is the stream, gives one partition of output, which those operators keep in
    order. A stream without a delay releases its events in arrival order, `SEQ`'s, from as many
    partitions as its source reads (no Sequencer)."""
    producer = _row_by_row_from(graph, port)
    return isinstance(producer, g.Source) and producer.event_time is not None and bool(producer.watermark_ms)


def from_timed_merge(graph: g.Graph, port: g.Port) -> bool:
    """Whether the rows at `port` are a merge's with event time (a Union), through row-by-row
    operators only: on Spark they come input by input, and only their event time puts them in the
    merge's order (event time, then input, then arrival), which a SELECT that drops it must keep in
    their `SEQ` (deployer.spark.translate.stateless.map_in_time_order)."""
    producer = _row_by_row_from(graph, port)
    return isinstance(producer, g.Union) and producer.event_time is not None


def _row_by_row_from(graph: g.Graph, port: g.Port) -> g.Node:
    """The first node upstream of `port` that is not an operator of one input that passes its rows
    on in the order they come (a Map, Filter, MultiFilter, ReadSQL or UpdateSQL)."""
    producer = graph.node(port.node)
    while isinstance(producer, g.Map | g.Filter | g.MultiFilter | g.ReadSQL | g.UpdateSQL):
        producer = graph.node(producer.inputs[0].node)
    return producer


# Operators that pass rows on one by one, in the order they come: what comes out of a pattern's
# partitions reaches their consumers interleaved as it reached them.
_ROW_BY_ROW = (g.Map, g.Filter, g.MultiFilter, g.ReadSQL, g.Union)


def out_of_time_order(graph: g.Graph, port: g.Port) -> g.Pattern | g.Join | None:
    """The pattern with PARTITION BY or the join whose rows reach `port` through row-by-row
    operators, if any: on Spark such rows come out of time order across micro-batches, where the
    reference executor's come in time order. Spark runs a pattern's partitions apart: one whose
    events ran ahead of the watermark makes its matches a micro-batch before another's earlier
    absences fire. A join makes a pair when the later of its two events arrives, and a pair's time
    is its left event's: a left event that pairs with a right one of a later micro-batch comes after
    pairs of later left events. A reader whose result depends on the order of rows reads them in
    time order once the watermark has passed them (cpl.plan_order; docs/language.md, "Rows out of
    time order"). An OutputRate on the way ends the search: it lets its rows out in time order."""
    found: dict[str, g.Pattern | g.Join | None] = {}
    for node in graph.nodes:  # producers first: each node's answer from its inputs'
        found[node.id] = unordered_by(node, [found[p.node] for p in node.inputs])
    return found[port.node]


def unordered_by(node: g.Node, inputs: list[g.Pattern | g.Join | None]) -> g.Pattern | g.Join | None:
    """`out_of_time_order` of `node`'s output, given that of each of its inputs: one step, so that a
    planner that adds nodes one at a time answers for each once (cpl.plan_order)."""
    if isinstance(node, g.Join) or (isinstance(node, g.Pattern) and node.partition is not None):
        return node
    if isinstance(node, _ROW_BY_ROW):
        return next((u for u in inputs if u is not None), None)
    return None


def partition_keyed(graph: g.Graph, port: g.Port, index: int) -> bool:
    """Whether field `index` at `port` is, in every row, its pattern's partition key: a field of an
    event that every match binds (a step outside OR, with a minimum of one), read through
    row-by-row operators that pass it on. Rows that differ in it come from different partitions,
    whose relative order then changes no upsert keyed by it."""
    node = graph.node(port.node)
    if isinstance(node, g.Map | g.Pattern):
        expr = node.projections[index].expr
        if not isinstance(expr, ir.Col):
            return False
        if isinstance(node, g.Pattern):
            return expr.index < len(node.row) and _binds_partition_key(node, node.row[expr.index])
        return partition_keyed(graph, node.inputs[0], expr.index)
    if isinstance(node, g.Filter | g.MultiFilter) or (
        isinstance(node, g.ReadSQL) and index < len(node.input_schema)
    ):
        return partition_keyed(graph, node.inputs[0], index)
    if isinstance(node, g.Union):
        return all(partition_keyed(graph, p, index) for p in node.inputs)
    return False


def _binds_partition_key(node: g.Pattern, ref: Ref) -> bool:
    slot = node.automaton.slots[ref.slot]
    if node.partition is None or ref.field != node.partition[slot.input]:
        return False
    if ref.agg is not None or ref.index is not None or ref.from_last not in (None, 0):
        return False
    for state in node.automaton.states:
        e = state.element
        steps = [e.left, e.right] if isinstance(e, Logical) and e.op == "and" else [e]
        if any(isinstance(s, Step) and s.slot == ref.slot and s.min >= 1 for s in steps):
            return True
    return False


# Operators that take each event on its own and keep its event time: the events of a merge's input
# reach it through them in the order their source released them (Aggregate and Join re-time theirs).
_PER_EVENT = (g.Source, g.Map, g.Filter, g.MultiFilter, g.Union, g.ReadSQL, g.UpdateSQL)


def _per_event_upstream(graph: g.Graph, ports: tuple[g.Port, ...]) -> list[g.Node]:
    """The nodes that `ports` come from through per-event operators only (the first Aggregate or
    Join on a path ends it), each once."""
    seen: dict[str, g.Node] = {}
    todo = [graph.node(p.node) for p in ports]
    while todo:
        n = todo.pop()
        if n.id in seen or not isinstance(n, _PER_EVENT):
            continue
        seen[n.id] = n
        todo.extend(graph.node(p.node) for p in n.inputs)
    return list(seen.values())


def _merges(node: g.Node) -> bool:
    """Whether `node` merges its inputs' events by event time: a Union with event time, or a pattern
    over several streams (matched in their merged order)."""
    if isinstance(node, g.Pattern):
        return len(node.inputs) > 1
    return isinstance(node, g.Union) and node.event_time is not None


def merged_sources(graph: g.Graph) -> list[tuple[str, ...]]:
    """The source streams with event time that meet in a merge, as sets of two or more streams: the
    streams a Union with event time reads, directly or through per-event operators; two merges that
    share a stream make one set. Each set in script order, the sets in the order of their first
    stream. An engine must release the events of a set's streams in one event-time order
    (docs/language.md, "Merges"), so it sequences them together (deployer/spark/streams/sequencer.py)."""
    timed = [s.stream for s in graph.sources() if s.event_time is not None]
    owner = {s: s for s in timed}  # union-find: each stream's representative

    def root(s: str) -> str:
        while owner[s] != s:
            s = owner[s]
        return s

    for node in graph.nodes:
        if not _merges(node):
            continue
        met = [n.stream for n in _per_event_upstream(graph, node.inputs) if isinstance(n, g.Source)]
        for s in met[1:]:
            if s in owner and met[0] in owner:
                owner[root(s)] = root(met[0])
    sets: dict[str, list[str]] = {}
    for s in timed:
        sets.setdefault(root(s), []).append(s)
    return [tuple(members) for members in sets.values() if len(members) > 1]


def self_merged_sources(graph: g.Graph) -> set[str]:
    """The source streams with event time that a Union with event time reads through two or more of
    its inputs (`FROM s, t` where t is a WHERE or SELECT over s). Their events meet themselves in the
    merge, whose order puts an event's copy from the first input before the copy from the second:
    an engine may release their events at a time only once none can come later at that time, as for
    streams that meet other streams (deployer.spark.streams.sequencer)."""
    timed = {s.stream for s in graph.sources() if s.event_time is not None}
    out: set[str] = set()
    for node in graph.nodes:
        if not _merges(node):
            continue
        seen: set[str] = set()
        for port in node.inputs:
            met = {n.stream for n in _per_event_upstream(graph, (port,)) if isinstance(n, g.Source)}
            out |= met & seen & timed
            seen |= met
    return out


# ---- expressions that may fail -----------------------------------------------------------------

_INTEGER_KINDS = ("integer", "bigint")
# Functions whose evaluation may fail, given the types of their arguments.
_FAILING_FUNCTIONS: dict[str, Callable[[ir.Func], bool]] = {
    "sqrt": lambda f: True,  # of a negative number
    "power": lambda f: True,  # out of range or undefined
    "pow": lambda f: True,
    "mod": lambda f: True,  # division by zero
    "floor": lambda f: f.args[0].type.kind == "double",  # NaN, infinity or beyond bigint
    "ceil": lambda f: f.args[0].type.kind == "double",
    "ceiling": lambda f: f.args[0].type.kind == "double",
    "substring": lambda f: len(f.args) > 2,  # a negative length
    "substr": lambda f: len(f.args) > 2,
    "abs": lambda f: f.type.kind in _INTEGER_KINDS,  # of the least integer
    "round": lambda f: _round_may_overflow(f),
    "from_epoch_millis": lambda f: True,  # beyond the years 1 to 9999
}


def _round_may_overflow(f: ir.Func) -> bool:
    """round(x, d): 2147483647 to -1 digits does not fit an integer; a decimal's carry (99.5 to
    100) fits its type but where that was cut to 38 digits."""
    d = f.args[1] if len(f.args) > 1 else ir.Lit(f.type, 0)
    if not (isinstance(d, ir.Lit) and isinstance(d.value, int)):
        return f.type.kind in (*_INTEGER_KINDS, "decimal")
    if f.type.kind in _INTEGER_KINDS:
        return d.value < 0
    return f.type.kind == "decimal" and decimals.round_may_overflow(f.args[0].type, d.value)


def _fails_itself(e: ir.Expr) -> bool:
    """Whether `e`'s own operation may fail, its operands being values (their own failures aside)."""
    if isinstance(e, ir.Unary):
        return e.op == "neg" and e.type.kind in _INTEGER_KINDS  # overflow
    if isinstance(e, ir.Binary):
        if e.op in ("/", "%", "+", "-", "*") and (e.left.type.is_null or e.right.type.is_null):
            return False  # NULL whatever the other operand is (found by the fuzzer, seed 38013)
        if e.op in ("/", "%"):
            return True  # division by zero
        if e.op in ("+", "-", "*") and e.type.kind == "decimal":  # overflow, beyond 38 digits only
            return decimals.may_overflow(e.op, decimals.operand_type(e.left), decimals.operand_type(e.right))
        return e.op in ("+", "-", "*") and e.type.kind in _INTEGER_KINDS  # overflow
    if isinstance(e, ir.Cast):
        src, dst = e.arg.type.kind, e.type.kind
        if dst in ("char", "varchar") or "null" in (src, dst):
            return False
        return src != dst or dst == "decimal"  # a value that does not convert, or out of range
    if isinstance(e, ir.Func):
        check = _FAILING_FUNCTIONS.get(e.name.lower())
        return check is not None and check(e)
    return False


def can_fail(e: ir.Expr) -> bool:
    """Whether evaluating `e` may fail for some event: division by zero, integer or decimal
    overflow, a CAST that does not convert, a function outside its domain. Both engines dead-letter
    such an event (the Spark translation records an error condition exactly for these operations; a
    test checks that the two agree)."""
    return any(_fails_itself(x) for x in ir.walk(e))


# ---- ReadSQL results that may not fit ----------------------------------------------------------


def unfit_results(node: g.ReadSQL) -> tuple[int, ...]:
    """The result fields of `node` that may receive a value not of their type (operators.results),
    which dead-letters its event. None may when the field is a varchar without a length (every
    value has a text form), or when the store described its column as exact (its driver only
    returns values of that type, as PostgreSQL's int4 for integer) with the field's very type.
    RETURNS alone vouches for nothing: SQLite keeps any value in any column, and a declaration may
    be wrong."""
    vouched = vouched_results(node)
    return tuple(
        j
        for j, f in enumerate(node.result_fields)
        if not (f.type.kind == "varchar" and f.type.length is None) and j not in vouched
    )


def vouched_results(node: g.ReadSQL) -> dict[int, str]:
    """The result fields of `node` whose column the store described as exact with the field's very
    type (its driver returns only such values: PostgreSQL's int4 read as integer), each with the
    database's type it was described as. A value that does not fit one of them is not the event's
    fault: the column's type has changed since the script was compiled, and both engines stop the
    run saying so (operators.results.TypeChanged). The engines skip the per-value check for them
    where they can (operators.results.convert_column's fast path)."""
    described = node.query.described
    if described is None:
        return {}
    return {
        j: described[j].source
        for j, f in enumerate(node.result_fields)
        if j < len(described) and described[j].exact and described[j].type == f.type
    }


# An aggregate that needs more events than this in one window to overflow is taken not to.
_MAX_WINDOW_DIGITS = 9  # 10^9 events


def can_overflow(agg: ir.Agg) -> bool:
    """Whether `agg`'s value may not fit its type in a window of fewer than 10^9 events (its row
    is then an error): a sum of bigints; a sum or average of decimal(p, s) for p > 28 (decimal(38, s)
    holds the sum of 10^(38 - p) of them). A sum of integers takes 2^32 of them to leave the bigint
    range. Past that the engines differ (docs/language.md, "Engines")."""
    if agg.arg is None or agg.func not in ("sum", "avg"):
        return False
    t = agg.arg.type
    if t.kind == "decimal":
        return 38 - (t.precision or 38) < _MAX_WINDOW_DIGITS + 1
    return agg.func == "sum" and t.kind == "bigint"


# ---- live fields ---------------------------------------------------------------------------------

# A set of field positions, or None for "all of them".
Live = frozenset[int] | None


def live_fields(graph: g.Graph) -> dict[g.Port, Live]:
    """The fields of every port that some consumer reads (every port that has a consumer or is a
    named stream).

    Engines use it to leave unread fields behind (Spark: a ReadSQL sends only these to Python and
    back). It is conservative: every field is live for a named stream (a sink, the run's output or
    a test may read it whole), for an operator whose rows may reach a dead letter (a dead letter
    shows the whole event), and for every operator not listed in `_reads`."""
    live: dict[g.Port, Live] = {port: None for port in graph.streams.values()}
    for node in reversed(graph.nodes):  # consumers come after their producers
        outs = [live.get(g.Port(node.id, i), frozenset()) for i in range(node.outputs)]
        for port in node.inputs:
            read = _reads(node, outs)
            have = live.get(port, frozenset())
            live[port] = None if read is None or have is None else have | read
    return live


def _reads(node: g.Node, outs: list[Live]) -> Live:
    """The fields of its input that `node` reads, given the live fields of its outputs."""
    if isinstance(node, g.Map):
        exprs = [p.expr for p in node.projections]
        return None if any(map(can_fail, exprs)) else _columns(exprs)
    if isinstance(node, (g.Filter, g.MultiFilter)):
        preds = [node.predicate] if isinstance(node, g.Filter) else list(node.predicates)
        if any(map(can_fail, preds)):
            return None
        return _union([_columns(preds), *outs])
    if isinstance(node, g.Union):
        return outs[0]
    # A ReadSQL may dead-letter any event, whole: its store may refuse the event's read (a bad
    # cast, a NUL in text for PostgreSQL) or return a value that does not fit; so every field of its
    # input is live (the Spark translation still leaves the unread ones behind on the way to its
    # consumers: deployer.spark.datastores.sql.read_sql), as for every operator not listed here.
    return None


def _columns(exprs: list[ir.Expr]) -> frozenset[int]:
    return frozenset(c.index for e in exprs for c in ir.columns(e) if c.side == 0)


def _union(sets: list[Live]) -> Live:
    out: frozenset[int] = frozenset()
    for s in sets:
        if s is None:
            return None
        out |= s
    return out
