"""Can a changed script resume from the checkpoint of the script it replaces?

A deployment's checkpoint holds, per streaming query (one per sink stream and per materialized
table), how far each input was read and the state of its stateful operators (window aggregates,
joins). Spark resumes a changed query from it only when those are unchanged, and otherwise fails
late and obscurely (or, worse, silently misreads the state). So the rule, checked before the
catalog is changed:

    for every output that the old and the new deployment both have, the inputs it reads (stream,
    schema, event-time field, bound URI, in plan order) and its stateful operators (Aggregate:
    window, group-by keys, aggregates, and for TUPLE/BATCH windows the buffered rows' schema;
    Join: both windows, both schemas, the event-time fields, the condition; Pattern: its automaton,
    its inputs' schemas, its partition key), in topological order, must be the same.

Node ids, line numbers and stateless operators (Map, Filter, MultiFilter, Union, ReadSQL, UpdateSQL)
are free to change: their effect on the checkpoint is nil, with one exception: the streams with event
time that meet in a merge (a Union) pass the Sequencer together, each in a stage that reads all of
them and keeps their state (deployer.spark.streams.merge_sequencer), in every query that reads one of them.
So which streams are sequenced together must not change either (`remerged`); nor may a stream that
passes no Sequencer because only TIME windows read it (deployer.spark.run.held) come to need one
(`held.reheld`). A new output starts with its own empty checkpoint; a removed one is simply no longer
run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from deployer.spark.output.placement import in_window, in_window_aggregation, in_window_processor
from deployer.spark.run import held
from deployer.spark.run.pattern_groups import pattern_groups
from deployer.spark.run.queries import bound_uri, sequenced_merges
from deployer.spark.run.stateless_groups import stateless_groups
from deployer.spark.windows.state_layout import bucketed
from operators import graph as g
from operators.analysis import ancestors

Part = tuple[str, str]  # (what, value), e.g. ("window", "TIME SIZE 1 DAY ADVANCE 1 DAY")


def _source(node: g.Source, sources: Mapping[str, str]) -> tuple[str, tuple[Part, ...]]:
    uri = bound_uri(sources, node.stream)
    if node.trigger is not None:
        # a trigger's offsets are its ticks: a changed schedule goes on from the last tick read
        uri = "trigger"
    return (
        f"input stream '{node.stream}'",
        (
            ("stream", node.stream.lower()),
            ("schema", str(node.schema)),
            ("event time", node.event_time or "none"),
            ("source", uri),
        ),
    )


def _stateful(graph: g.Graph, node: g.Node) -> tuple[str, tuple[Part, ...]] | None:
    if isinstance(node, g.Aggregate):
        parts: list[Part] = [
            ("window", node.window.describe()),
            ("group by", ", ".join(f"{k.expr.to_cpl()} {k.expr.type}" for k in node.keys) or "nothing"),
            ("aggregates", ", ".join(f"{a.expr.to_cpl()} {a.expr.type}" for a in node.aggs) or "none"),
        ]
        if node.window.kind != "time":  # TUPLE/BATCH windows keep the events themselves in state
            parts.append(("buffered schema", str(node.input_schema)))
        if bucketed(
            node
        ):  # the state is per bucket of groups, not per group (deployer.spark.windows.tuple_buckets)
            parts.append(("state", "per bucket of groups, Arrow IPC"))
        return f"the window aggregate of line {node.line}", tuple(parts)
    if isinstance(node, g.Join):
        return (
            f"the join of line {node.line}",
            (
                ("windows", f"{node.left_window.describe()} / {node.right_window.describe()}"),
                ("schemas", f"{node.left_schema} / {node.right_schema}"),
                ("event time", f"{node.left_time} / {node.right_time}"),
                ("condition", node.predicate.to_cpl()),
            ),
        )
    if isinstance(node, g.Pattern):
        # the automaton's states and the keys its state is kept by; its state's layout is the
        # processor's STATE_VERSION (deployer.spark.patterns.processor)
        return (
            f"the pattern of line {node.line}",
            (
                ("automaton", "; ".join(node.automaton.describe(node.streams))),
                ("schemas", " / ".join(str(s) for s in node.input_schemas)),
                ("partition", str(node.partition)),
            ),
        )
    if isinstance(node, g.OutputRate):
        # its state is the processor's pickled limiter (deployer.spark.output.processor STATE_VERSION),
        # Spark's own window aggregation's (deployer.spark.output.in_window), a part of the TIME
        # window's own aggregation's (deployer.spark.windows.time_window_limit) or of the TUPLE or
        # BATCH window's processor's (deployer.spark.windows.window_limit STATE_VERSION)
        native: tuple[Part, ...] = ()
        if in_window(graph, node):
            native = (("state", "Spark's window aggregation"),)
        elif in_window_aggregation(graph, node):
            native = (("state", "the window's aggregation"),)
        elif in_window_processor(graph, node):
            native = (("state", "the window's processor"),)
        # a node the planner put before what reads rows out of time order (cpl.plan_order)
        label = f"the time order of the rows of line {node.line}" if node.reorders else None
        return (
            label or f"the OUTPUT clause of line {node.line}",
            (
                ("output", node.describe()),
                ("per group", ", ".join(node.group_by) or "nothing"),
                ("schema", str(node.input_schema)),
                *native,
            ),
        )
    return None


Signature = tuple[tuple[tuple[str, tuple[Part, ...]], ...], tuple[tuple[str, tuple[Part, ...]], ...]]


def outputs(graph: g.Graph, sources: Mapping[str, str], sinks: Mapping[str, str]) -> dict[str, Signature]:
    """Per output query ("sink <stream>" / "table <name>"): (its inputs, its stateful operators)."""
    ends: dict[str, str] = {}
    for stream in sinks:
        port = next((p for s, p in graph.streams.items() if s.lower() == stream.lower()), None)
        if port is not None:
            ends[f"sink '{stream.lower()}'"] = port.node
    for n in graph.nodes:
        if isinstance(n, g.Materialize):
            ends[f"table '{n.table.name.lower()}'"] = n.id
    out: dict[str, Signature] = {}
    for key, node_id in ends.items():
        upstream = ancestors(graph, node_id)
        inputs = tuple(_source(n, sources) for n in upstream if isinstance(n, g.Source))
        stateful = tuple(s for s in (_stateful(graph, n) for n in upstream) if s is not None)
        out[key] = (inputs, stateful)
    return out


def _diff(
    kind: str, old: tuple[tuple[str, tuple[Part, ...]], ...], new: tuple[tuple[str, tuple[Part, ...]], ...]
) -> list[str]:
    if [p for _, p in old] == [p for _, p in new]:
        return []
    if len(old) != len(new):
        before = "; ".join(label for label, _ in old) or "none"
        after = "; ".join(label for label, _ in new) or "none"
        return [f"its {kind} changed from [{before}] to [{after}]"]
    out = []
    for (_, parts_o), (label, parts_n) in zip(old, new, strict=True):
        # Labels hold line numbers, which may move freely: only the parts are compared. An operator
        # may have more parts than the one it replaces (a TUPLE window adds its buffered schema).
        was, now = dict(parts_o), dict(parts_n)
        for what in dict.fromkeys([*was, *now]):
            vo, vn = was.get(what, ""), now.get(what, "")
            if vo != vn:
                out.append(f"{label}: {what} changed from {vo or 'none'} to {vn or 'none'}")
    return out


def incompatibilities(
    old: g.Graph,
    old_bindings: Mapping[str, Mapping[str, str]],
    new: g.Graph,
    new_bindings: Mapping[str, Mapping[str, str]],
) -> list[str]:
    """Why `new` cannot resume from `old`'s checkpoint; empty when it can."""
    before = outputs(old, old_bindings.get("sources", {}), old_bindings.get("sinks", {}))
    after = outputs(new, new_bindings.get("sources", {}), new_bindings.get("sinks", {}))
    merged = remerged(
        merges(old, old_bindings.get("sources", {})), merges(new, new_bindings.get("sources", {}))
    )
    unheld = [
        held.unheld(graph, b.get("sources", {}), b.get("sinks", {}))
        for graph, b in [(old, old_bindings), (new, new_bindings)]
    ]
    # the new script's shared queries planned as its run on the old one's checkpoint plans them: the
    # old queries keep their sinks, new sinks share queries of their own generation
    # (deployer.spark.run.stateless_groups, .pattern_groups)
    old_sinks, new_sinks = old_bindings.get("sinks", {}), new_bindings.get("sinks", {})
    was, shares = stateless_shares(old, old_sinks), [pattern_shares(old, old_sinks)]
    alone = set(before) - {key for groups in (was, shares[0]) for keys in groups.values() for key in keys}
    now = stateless_shares(new, new_sinks, sinks_of(was) | apart(alone))
    shares.append(pattern_shares(new, new_sinks, sinks_of(shares[0])))
    return (
        compare(before, after)
        + regrouped(was, now, alone, set(after), kind="stateless sinks")
        + regrouped(shares[0], shares[1], alone, set(after))
        + merged
        + held.reheld(*unheld)
    )


def merges(graph: g.Graph, sources: Mapping[str, str]) -> list[list[str]]:
    """The streams Spark sequences together, lower-case (deployer.spark.run.queries.sequenced_merges)."""
    return [[s.lower() for s in merge] for merge in sequenced_merges(graph, sources)]


def shown(merges: list[list[str]]) -> str:
    """`merges` as text: "a, b; c, d"."""
    return "; ".join(", ".join(merge) for merge in merges) or "none"


def remerged(before: list[list[str]], after: list[list[str]]) -> list[str]:
    """Why the checkpoint of a run whose streams were sequenced together as `before` (`merges`)
    cannot be resumed by one that sequences them as `after`: the Sequencers' state differs."""
    if before == after:
        return []
    return [
        f"the streams with event time that meet in a merge (a Union), which Spark sequences together, "
        f"changed from [{shown(before)}] to [{shown(after)}]; the state of their Sequencers "
        "(deployer/spark/streams/merge_sequencer.py) cannot be carried over"
    ]


def stateless_shares(
    graph: g.Graph, sinks: Mapping[str, str], started: Mapping[str, Collection[str]] | None = None
) -> dict[str, list[str]]:
    """The queries stateless sinks share (deployer.spark.run.stateless_groups) -> their output keys;
    `started`: the queries that have started -> their sinks (lower-case): the shared ones keep
    theirs, a `sink:<name>` one its sink."""
    asked = {s.lower() for s in sinks}
    groups = stateless_groups(graph, [s for s in graph.streams if s.lower() in asked], started)
    return {name: [f"sink '{s.lower()}'" for s in members] for name, members in groups}


def apart(keys: Iterable[str]) -> dict[str, set[str]]:
    """The `sink:<name>` queries of the sinks among output keys, as `stateless_groups` takes them."""
    names = [k.removeprefix("sink '").removesuffix("'") for k in keys if k.startswith("sink '")]
    return {f"sink:{name}": {name} for name in names}


def pattern_shares(
    graph: g.Graph, sinks: Mapping[str, str], started: Mapping[str, Collection[str]] | None = None
) -> dict[str, list[str]]:
    """The queries pattern sinks share (deployer.spark.run.pattern_groups) -> their output keys;
    `started`: the shared queries that have started -> their sinks (lower-case), which they keep
    (the others over their streams share the next query)."""
    asked = {s.lower() for s in sinks}
    groups = pattern_groups(graph, [s for s in graph.streams if s.lower() in asked], (), started)
    return {name: [f"sink '{s.lower()}'" for s in members] for name, members in groups}


def sinks_of(queries: Mapping[str, Collection[str]]) -> dict[str, set[str]]:
    """Queries -> the output keys of their sinks ("sink 'x'"), as queries -> the sinks' names."""
    return {
        name: {key.removeprefix("sink '").removesuffix("'") for key in keys} for name, keys in queries.items()
    }


def regrouped(
    before: Mapping[str, list[str]],
    after: Mapping[str, list[str]],
    own: set[str],
    keys: set[str],
    written: Collection[str] = (),
    kind: str = "pattern sinks",
) -> list[str]:
    """Why sinks would move into, out of or between the queries they share (`pattern_shares` or
    `stateless_shares` of the old and the new run, `kind` saying which; `own`: the outputs that had
    queries of their own; `keys`: the outputs of the new run). One removed from the script is no
    longer run (a pattern's keys with a deadline are dropped as their timers fire:
    deployer.spark.patterns.processor); one that joined a started query would miss the events it
    read before (the plan gives a new sink a query of its own generation: deployer.spark.run.
    pattern_groups, .stateless_groups; this says so if it ever did not); one that leaves it for a
    query of its own would be written again from the beginning, and so would one that comes back
    to the script after runs without it (`written`: the outputs a checkpoint's runs have written,
    which its manifest and record know; a script does not)."""
    problems = []
    was = {key: name for name, keys in before.items() for key in keys}
    for name, members in after.items():
        for key in members:
            if key in own:
                problems.append(
                    f"output {key} was written by a query of its own, and would now share the query "
                    f"{name} with other {kind}"
                )
            elif key in was and was[key] != name:
                problems.append(
                    f"output {key} was written by the query {was[key]}, and would now be by {name}"
                )
            elif key not in was and name in before:
                problems.append(
                    f"output {key} would join the query {name} of the {kind} "
                    f"{', '.join(before[name])}, which resumes where it stopped, so it would miss the "
                    "events read before"
                )
            elif key not in was and key in written:
                problems.append(
                    f"output {key} was written before by a query of {kind} that has gone on "
                    f"without it since: the query {name} would write its rows again from the beginning "
                    "(write them to a sink of another name)"
                )
    grouped = {key for keys in after.values() for key in keys}
    problems += [
        f"output {key} was written by the query {name} shared with other {kind}, and would now "
        "have a query of its own, which would write it again from the beginning"
        for key, name in was.items()
        if key not in grouped and key in keys
    ]
    return problems


def compare(before: Mapping[str, Signature], after: Mapping[str, Signature]) -> list[str]:
    """`incompatibilities` of two sets of `outputs` signatures (deployer.spark.run.checkpoint keeps the
    signatures of a checkpoint's outputs in its manifest, not the script)."""
    problems: list[str] = []
    for key in sorted(before.keys() & after.keys()):
        (ins_o, st_o), (ins_n, st_n) = before[key], after[key]
        for why in _diff("inputs", ins_o, ins_n) + _diff("stateful operators", st_o, st_n):
            problems.append(f"output {key}: {why}")
    return problems
