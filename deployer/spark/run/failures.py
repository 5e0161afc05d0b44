"""Where the failed rows of a Spark deployment are written: the queries that write failures only, and
the failures a sink's or a table's query writes along with its rows (deployer.spark.run.queries).

A failure point after a window, a join or a data store call whose rows a sink or a table writes,
as they are or through Maps (`queries.written_with`), is written by that query: it runs the frame
before the split once per micro-batch (`graph.Split.whole`), persists the batch, writes its other
rows and then its failed rows as dead letters (`along`). The failed rows, and those of the Maps
after the split, are counted by observations in the writer's job, the one that runs the batch into
its cache, and their dead letters built only when there are any (a job of their own to count them cost ~50 ms a micro-batch, most of
it Spark's fixed cost of a job and its planning: the stateless `ON SQL` pipeline of `bench/run
--only e2e`, ad hoc). A query of its own would compute the window, or call the store, a second time.
A data store call's failures, with Maps after it that cannot fail, are split on the driver instead
(`_split_on_driver`): one collect a micro-batch, no cache.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from deployer.spark.datastores.materialize import TableOutput
from deployer.spark.run.inputs import Inputs
from deployer.spark.run.queries import failed_query, split_chain
from deployer.spark.run.shared import observed, plans_of, split_collected, stem, unstem
from deployer.spark.streams.dead_letters import DeadLetterWriter, dead_letter_frame
from deployer.spark.streams.driver_rows import DriverSink
from deployer.spark.streams.sinks import Writer
from deployer.spark.streams.sources import counted, events_of, rejects, released
from deployer.spark.translate.columns import where_failed
from deployer.spark.translate.graph import (
    ERR,
    SPLIT_EVENT,
    DeadLetter,
    SparkGraph,
    Split,
    with_failed_event,
)
from operators import graph as g
from operators.analysis import ancestors


def numbered(dead_letters: Sequence[DeadLetter]) -> list[tuple[DeadLetter, str]]:
    """Each dead letter with the name of its failure point's query, `failed:<node>[-k]`: a node may
    split off failed rows in more than one place (an Aggregate: its input events and its result
    rows), numbered in the order the translation met them, as `queries.plan_queries` numbers them."""
    seen: dict[str, int] = {}
    out = []
    for dl in dead_letters:
        if dl.stateless:
            out.append((dl, ""))
            continue
        k = seen[dl.node] = seen.get(dl.node, 0) + 1
        out.append((dl, failed_query(dl.node, k)))
    return out


def where(dl: DeadLetter) -> dict[str, Any]:
    """What a dead letter of `dl` says of where it failed."""
    return {"stage": dl.stage, "stream": dl.stream, "node": dl.node, "line": dl.line}


def along(
    sg: SparkGraph,
    port: g.Port,
    assigned: Collection[str],
    dead: Callable[[str], DeadLetterWriter],
    output: Writer | TableOutput,
) -> tuple[DataFrame, Writer, set[str]]:
    """For a query that writes the rows of `port` and the failures of the nodes `assigned` to it
    (queries.written_with): what it runs, its foreachBatch, and the failure points it writes.

    It runs the rows of the window, join or store call the port's rows come from (`queries.split_chain`),
    before their split if any (`Split.whole`). Each micro-batch is persisted; its rows that did not
    fail go through the chain's Maps as a batch (their own failures written by `dead(query name of
    the failure point)`) and, made the port's rows (a table's `shape` selected), to `output`; then its
    failed rows are written by `dead(...)` too. All are written again, whole, if the batch is
    replayed. (A table's rows after a store call through Maps that cannot fail are split on the
    driver: `_split_on_driver`.)"""
    found = split_chain(sg.graph, port)
    assert found is not None, f"no window, join or data store call before {port}"
    base, chain = found
    base_port = g.Port(base.id)
    sg.port(port)  # translated, so that the Maps' failure points are known
    named = numbered(sg.dead_letters)
    # the base's split of its results (the only one with a Split), when this query writes it
    own = [(dl, dl.split, n) for dl, n in named if dl.node == base.id and dl.split is not None]
    split = own[0] if own and base.id in assigned else None
    maps = {dl.node: n for dl, n in named if dl.node in assigned and dl.node != base.id}
    writers = {n: dead(n) for n in [*([split[2]] if split else []), *maps.values()]}
    if split is not None and (out := _collected(output)) and _on_driver(sg, split[1], chain):
        return (*_split_on_driver(sg, split[:2], port, out, writers[split[2]]), set(writers))
    memo: dict[tuple[str, str], Any] = {}
    # a micro-batch's graph of the chain: Columns compiled once, its failures counted as it runs
    batch_graph = partial(
        SparkGraph, sg.graph, {}, sg.handlers, sg.stores_config, memo=memo, counts_failures=True
    )
    # a batch's failed rows: one Column for every batch
    failed_rows = F.count(F.when(F.col(ERR).isNotNull(), F.lit(1))).alias("rows")
    write = _shaped(output)

    def both(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            rows = batch
            failures = Observation()
            if split is not None:
                # counted in the writer's job, which runs the batch into its cache: no job of its own
                rows = split[1].kept(batch.observe(failures, failed_rows))
            chained: list[DeadLetter] = []
            if chain:
                over = batch_graph(ports={base_port: rows})
                rows = over.port(port)
                chained = over.dead_letters
            write(rows, batch_id)
            # then the dead letters, in the order the rows met their failure points
            if split is not None:
                dl, cut, name = split
                if _failed(failures, lambda: batch.where(F.col(ERR).isNotNull())):
                    writers[name](dead_letter_frame(cut.failed(batch), where(dl)), batch_id)
            for failed in chained:
                if failed.node in maps and _failed(failed.failures, failed.frame):
                    writers[maps[failed.node]](dead_letter_frame(failed.frame(), where(failed)), batch_id)
        finally:
            batch.unpersist()

    return (sg.port(base_port) if split is None else split[1].whole), both, set(writers)


# How a query that writes collected rows selects them (with the columns given) and writes a batch
# of them (the batch's DataFrame, its id, its rows collected)
Collected = tuple[Callable[[DataFrame], DataFrame], Callable[[DataFrame, int, pa.Table], Any]]


def _shaped(output: Writer | TableOutput) -> Writer:
    """A foreachBatch of the port's rows: for a table's query, its shape selected first."""
    if isinstance(output, TableOutput):
        shape, table = output.shape, output.write
        return lambda rows, batch_id: table(rows.select(*shape), batch_id)
    return output


def _collected(output: Writer | TableOutput) -> Collected | None:
    """`Collected` for a table's query (its writer takes a batch collected already) or a sink's
    (`output` a DriverSink); None for any other writer."""
    if isinstance(output, TableOutput):
        shape = output.shape
        return (lambda rows: rows.select(*shape, ERR, SPLIT_EVENT)), output.write
    if isinstance(output, DriverSink):
        sink = output
        return (lambda rows: sink.collected(rows, ERR, SPLIT_EVENT)), (lambda _, b, data: sink.write(data, b))
    return None


def _on_driver(sg: SparkGraph, cut: Split, chain: list[g.Map]) -> bool:
    """Whether a query that writes collected rows can split its micro-batches on the driver
    (`_split_on_driver`): the step after the split only drops columns, and no Map of the `chain`
    after it can fail."""
    maps = {m.id for m in chain}
    return cut.drops is not None and not any(dl.node in maps for dl in sg.dead_letters)


def _split_on_driver(
    sg: SparkGraph,
    split: tuple[DeadLetter, Split],
    port: g.Port,
    collected: Collected,
    dead: DeadLetterWriter,
) -> tuple[DataFrame, Writer]:
    """What a table's or a sink's query runs, and its foreachBatch, when the step after its rows'
    split only drops columns (`Split.drops`: a data store call's error column) and the Maps after it cannot
    fail: each row made the table's or the sink's (`collected`), every row kept, with its error
    (NULL unless it failed) and its failed event beside it. A micro-batch is one collect: its rows
    without an error go to the table's writer (materialize.py) or the sink as Arrow, then the failed
    ones, if any, to `dead` as dead letters, made from their collected values (`arrow_letters`, as a
    task that spools makes them). The other way (`along`) persists the batch, its job
    writes the cache, and it builds the plans of its split, Maps and shape in every micro-batch: the
    foreachBatch of the stateless `ON SQL` pipeline of `bench/run --only e2e` took 133-178 ms a
    micro-batch that way, 88-99 ms this one (medians of three alternated in-process runs each, ad
    hoc, with py4j's calls traced, which weighs more on the other way's many); its p99 latency 0.27,
    0.28 and 0.63 s against 0.25-0.26 s (untraced). The same pipeline to a file sink: 117-118 ms
    against 75-95 ms (the same way)."""
    dl, cut = split
    over = SparkGraph(sg.graph, {}, sg.handlers, sg.stores_config, memo={}, carried=(ERR, SPLIT_EVENT))
    over.ports[g.Port(dl.node)] = cut.through(with_failed_event(cut.whole, cut.event))
    return collected[0](over.port(port)), _split_writer(collected[1], dead, where(dl))


def stateless_on_driver(
    sg: SparkGraph, port: g.Port, label: str, output: Writer | TableOutput, dead: DeadLetterWriter
) -> tuple[DataFrame, Writer]:
    """What a sink's or a table's query runs, and its foreachBatch, when it writes the failures of
    the Map or Filter of `label` (`stateless-<node>`) that its rows come from through Maps and
    Filters that cannot fail (deployer.spark.run.driver_split): every row of that step kept, with
    its error and its failed event beside it (`SparkGraph.marked`), and split on the driver as
    `_split_on_driver` splits a data store call's. Its tasks spooled them before, in a `mapInArrow`
    of their own: a Python worker per task that each micro-batch sent its rows to and back
    (docs/architecture.md, "The rows that go on past a failure point")."""
    node = sg.graph.node(label.removeprefix("stateless-"))
    collected = _collected(output)
    assert collected is not None, f"{output!r} takes no collected batch"
    frame = collected[0](sg.marking(node.id, {}).port(port))
    return frame, _split_writer(collected[1], dead, where_failed(node))


def _split_writer(
    out: Callable[[DataFrame, int, pa.Table], Any], dead: DeadLetterWriter, fixed: dict[str, Any]
) -> Writer:
    """The foreachBatch of a query that splits its collected batches on the driver: the rows without
    an error to `out`, then the failed ones, if any, to `dead` as dead letters (`fixed`: their stage,
    stream, node and line)."""

    def both(batch: DataFrame, batch_id: int) -> None:
        rows, failed = split_collected(batch.toArrow(), fixed)
        out(batch, batch_id, rows)
        if failed:
            dead.lines(failed, batch_id)

    return both


def _failed(failures: Observation | None, rows: Callable[[], DataFrame]) -> int:
    """How many rows failed at a failure point: observed while the writer ran the batch, or, when
    its plan did not run (the optimizer folds a plan that can have no row to nothing), counted
    (`rows()`: the failed ones), in a job that runs the batch, as it must run (the state of its
    stateful operators commits the batch)."""
    seen = observed(failures) if failures is not None else None
    n = seen.get("rows") if seen else None
    return int(n) if n is not None else rows().count()


def failure_queries(sg: SparkGraph, written: Collection[str]) -> dict[str, DataFrame]:
    """The failure points with a query of their own (query name -> its dead letters), leaving out
    those `written` by a sink's or a table's query and those of stateless operators (`dead_letters`)."""
    return {
        name: dead_letter_frame(dl.frame(), where(dl))
        for dl, name in numbered(sg.dead_letters)
        if not dl.stateless and dl.spooled is None and name not in written
    }


_PARSED = "parsed:"  # a source's parsed rows among the dead-letters query's inputs
_MARKED = "marked:"  # a Sequencer's output among them


def _read(inputs: Inputs, source: dict[str, g.Source], streams: list[str]) -> dict[str, DataFrame]:
    """What the dead-letters query reads of the sources `streams`: each one's parsed rows, each
    Sequencer's output. A stream without event time is counted here too (sources.counted): no other query may
    read it (the least any query read counts: deployer.spark.run.progress), and its records are
    records read all the same (docs/guarantees.md). A stream with event time is counted on the way
    to its Sequencer, whose output (`marked`) this query reads."""
    frames = {
        f"{_PARSED}{s}": parsed if s in inputs.marked else counted(parsed, source[s])
        for s, parsed in inputs.parsed.items()
        if s in streams
    }
    return frames | {f"{_MARKED}{s}": m for s, (m, _) in inputs.marked.items() if s in streams}


def _stateless_failures(over: SparkGraph, nodes: list[str]) -> list[DataFrame]:
    """The dead letters of the stateless failure points of `nodes` in a micro-batch's plan."""
    over.observations = {}  # the Filters' counts are their sinks' queries' to report
    for node in nodes:
        over.port(g.Port(node))
    # Only the stateless failure points: translating a window or a store call for the failures of
    # its input also splits its results, which its own query writes (the batch frames of the window
    # itself, or of the store call, are never run). The node's id is not enough to tell them apart:
    # a window has both, its input's and its results' (a BATCH window's refused events were written
    # twice: tests/fuzz/test_found_a_window_failure_point_written_twice.py).
    return [
        dead_letter_frame(dl.frame(), where(dl))
        for dl in over.dead_letters
        if dl.node in nodes and dl.stateless
    ]


def dead_letters(
    sg: SparkGraph, inputs: Inputs, dead: Writer, spooled: Collection[str] = ()
) -> tuple[DataFrame, Writer] | None:
    """The dead-letters query, if the deployment has one: the rejected records of its sources
    (unparsable records, events without event time, late events) and the failures of its stateless
    operators, in one `dead_letter_frame` per micro-batch, for `dead`; except those that the one
    query reading the source, or computing the operator, writes from its tasks (their labels
    `spooled`: `input-<stream>`, `stateless-<node>`; deployer.spark.run.queries._by_readers).

    It reads each source once and passes each Sequencer once: its streaming DataFrame is, side by
    side (deployer.spark.run.shared.stem), each rejecting source's parsed rows and each Sequencer's
    output before its split (`Inputs.parsed`, `Inputs.marked`), which each micro-batch splits into
    events, rejected records and late events (sources.events_of, rejects, released). The events and
    the rejects as streaming DataFrames of their own read the source again, and ran the Sequencer
    (a stateful operator, a Python worker per task) again, for each. Each micro-batch translates
    the stateless operators that can fail as batch DataFrames (deployer.spark.run.shared.plans_of);
    a union of each operator's failed rows as streaming DataFrames would repeat the source, and its
    Sequencer, for every such operator."""
    nodes = list(dict.fromkeys(dl.node for dl in sg.dead_letters if dl.stateless and dl.spooled is None))
    rejecting = [s for s in inputs.parsed if f"input-{s}" not in spooled]
    if not nodes and not rejecting:
        return None
    upstream = {a.id for n in nodes for a in ancestors(sg.graph, n)}
    streams = [s.stream for s in sg.graph.sources() if s.id in upstream]
    source = {s.stream: s for s in sg.graph.sources()}
    frames = _read(inputs, source, [s for s in inputs.parsed if s in rejecting or s in streams])
    frames |= {s: sg.sources[s] for s in streams if s not in inputs.parsed}  # the generator's
    names = list(frames)
    plan = plans_of(sg, dead_letters=True)

    def write(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            # The batch runs whole, whatever its dead letters: the state of the Sequencers in it must
            # commit the batch (an optimizer that folds a plan to nothing would not run them).
            batch.count()
            parts = unstem(batch, names)
            events = {s: parts[s] for s in streams if s in parts}
            out = []
            for s in (s for s in inputs.parsed if f"{_PARSED}{s}" in parts):
                bad = rejects(parts[f"{_PARSED}{s}"], source[s])
                if s in inputs.marked:
                    events[s], late = released(source[s], parts[f"{_MARKED}{s}"], inputs.marked[s][1])
                    bad = bad.unionByName(late, allowMissingColumns=True)
                else:
                    events[s] = events_of(parts[f"{_PARSED}{s}"], source[s])
                if s in rejecting:
                    out.append(dead_letter_frame(bad, {"stage": "input", "stream": s}))
            out += _stateless_failures(plan({s: events[s] for s in streams}), nodes)
            union = out[0]
            for frame in out[1:]:
                union = union.unionByName(frame)
            # one task: a union has a partition per operator and batch partition, each a task to schedule
            dead(union.coalesce(1), batch_id)
        finally:
            batch.unpersist()

    return stem(frames, names), write
