"""Stateless sinks share one streaming query, which reads each input once per micro-batch.

A sink whose stream the sources give by stateless operators alone (Map, Filter, MultiFilter, Union)
needs no streaming state. When a script has two or more such sinks, one query writes them all,
`sinks:stateless` (deployer.spark.run.queries), instead of one query each: its streaming DataFrame is the sources' events (tagged by
source when there are several), each micro-batch of it is persisted, and every sink's stream is
translated from it as a batch DataFrame and written, in script order (the Columns of that
translation are compiled for the first batch and reused: SparkGraph.memo). So each input is read, and a
MultiFilter evaluates its predicates, once per micro-batch for all those sinks (the paper's point of
a MultiFilter), where a query per sink would each read, parse and filter the input again.

Outputs that need state (Aggregate, Join) or call a data store (ReadSQL, UpdateSQL), tables and dead
letters keep their own queries (deployer.spark.run.deployment). One query, one checkpoint: the sinks it
writes are recorded in the checkpoint's manifest, and a restart whose shared sinks differ is
refused (deployer.spark.run.checkpoint), because a sink that joins a query resuming mid-input would miss the
events before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deployer.spark.handlers import HANDLERS
from deployer.spark.run.driver_split import split_steps
from deployer.spark.streams.dead_letters import DeadLetterWriter, arrow_letters
from deployer.spark.streams.driver_rows import DriverSink, collected_names
from deployer.spark.streams.sinks import Writer
from deployer.spark.translate.columns import where_failed
from deployer.spark.translate.graph import ERR, SPLIT_EVENT, SparkGraph
from operators import graph as g
from stores.bindings import StoreBindings

_TAG = "__input"  # which source an event of the shared stream came from, with several sources
_SINK = "__sink"  # which sink a row of a batch collected for all of them is for


def stem(frames: Mapping[str, DataFrame], inputs: list[str]) -> DataFrame:
    """The streaming DataFrame of the shared query: the events of `inputs`, each source's row as a
    struct in a column of its own and tagged with the source's index when there are several."""
    if len(inputs) == 1:
        return frames[inputs[0]]
    out: DataFrame | None = None
    for k, stream in enumerate(inputs):
        tagged = frames[stream].select(F.lit(k).alias(_TAG), F.struct("*").alias(f"{_TAG}{k}"))
        out = tagged if out is None else out.unionByName(tagged, allowMissingColumns=True)
    assert out is not None
    return out


def unstem(batch: DataFrame, inputs: list[str]) -> dict[str, DataFrame]:
    """A micro-batch of `stem` back into each source's events."""
    if len(inputs) == 1:
        return {inputs[0]: batch}
    return {s: batch.where(F.col(_TAG) == k).select(f"{_TAG}{k}.*") for k, s in enumerate(inputs)}


def plans_of(
    sg: SparkGraph, dead_letters: bool = False, spool: Any = None
) -> Callable[[dict[str, DataFrame]], SparkGraph]:
    """`batch_plans` of a deployment's graph, as it translates it (its stores, its sources' frames,
    its checkpoint's layout: `sg.handlers`)."""
    return batch_plans(sg.graph, sg.stores_config, sg.timed_sources, dead_letters, spool, sg.handlers)


def batch_plans(
    graph: g.Graph,
    stores_config: StoreBindings | None = None,
    timed_sources: set[str] | None = None,
    dead_letters: bool = False,
    spool: Any = None,
    handlers: Mapping[type[g.Node], Any] = HANDLERS,
) -> Callable[[dict[str, DataFrame]], SparkGraph]:
    """The `plan` of `shared_writer`: a micro-batch's source events -> its batch SparkGraph. The
    graphs share one memo (the Columns are compiled for the first batch only) and build no
    dead-letter frames, unless `dead_letters` (the dead-letters query's own plans): the failed rows
    of a stateless operator are written by the tasks (`spool`, deployer.spark.streams.spool.Spool,
    where the deployment gave this query the operator's failure point), or dropped (another query,
    or the dead-letters query, writes them: deployer.spark.run.queries._by_readers)."""
    memo: dict[tuple[str, str], Any] = {}
    timed = set(timed_sources or ())

    def plan(frames: dict[str, DataFrame]) -> SparkGraph:
        sg = SparkGraph(
            graph,
            frames,
            handlers,
            stores_config,
            timed_sources=timed,
            memo=memo,
            collect_dead_letters=dead_letters,
        )
        sg.spool = spool
        return sg

    return plan


def observed(obs: Any) -> dict[str, Any] | None:
    """The metrics of a pyspark Observation, or None if no action has run its DataFrame.

    `Observation.get` would wait for ever then, and a writer may well run nothing: a replayed
    batch that a Redis stream sink finds already written. So look at the JVM Observation's future
    first (pyspark has no public way to ask)."""
    jo = getattr(obs, "_jo", None)
    if jo is None or not jo.future().isCompleted():
        return None
    if jo.getRow().length() == 0:
        # The action ran, but its plan held no observation: Spark's optimizer removes one above an
        # empty relation (a micro-batch with no events, or all of them filtered out before it) and
        # then completes the Observation with an empty Row, which pyspark cannot convert (the
        # `toPyRow` assertion that failed the whole query). Nothing was observed: nothing counted.
        return {}
    return dict(obs.get)


@dataclass(frozen=True)
class Report:
    """What a micro-batch of the shared query did that its progress cannot tell (the work is done on
    batch DataFrames): the rows its Filters and MultiFilters dropped, and the rows it wrote."""

    filtered: dict[str, int]  # node id -> rows
    out: int


def collected_together(
    sg: SparkGraph,
    graph: g.Graph,
    sinks: Mapping[str, DriverSink],
    split: Mapping[str, DriverSplit],
    memo: dict[str, Any] | None = None,
) -> tuple[DataFrame, list[list[str]]]:
    """What every sink of `sinks` collects of the batch, in one DataFrame, and each sink's column
    names: sink k's columns renamed `__s<k>_<i>` beside the tag `__sink` = k (the other sinks'
    columns NULL), so that one job brings them all to the driver where three sinks ran three jobs
    (`apart` splits them again). A sink of `split` collects its failed rows too (`DriverSplit`).

    `memo` (the query's, for every batch): each sink's column names and the Columns of its part,
    the others' NULLs of their types included, made at the first batch. Each DataFrame a batch's
    plan is built of costs Spark an analysis, 2 to 7 ms; a sink's part was two, and a union by name
    that found the missing columns (a MultiFilter's three sinks: 64 ms of a 10-event micro-batch
    built its plan, 34 with the names and Columns kept, ad hoc)."""
    memo = {} if memo is None else memo
    frames = []
    for stream in sinks:
        cut = split.get(stream)
        port = graph.streams[stream]
        frames.append(sg.marking(cut.node, cut.memo).port(port) if cut is not None else sg.port(port))
    if "parts" not in memo:
        memo["names"], memo["parts"] = _parts(frames, sinks, split)
    tagged = [df.select(*cols) for df, cols in zip(frames, memo["parts"], strict=True)]
    return reduce(DataFrame.union, tagged), memo["names"]


def _parts(
    frames: list[DataFrame], sinks: Mapping[str, DriverSink], split: Mapping[str, DriverSplit]
) -> tuple[list[list[str]], list[list[Column]]]:
    """`collected_together`'s column names of each sink, and the Columns of each sink's part: its
    tag, the sinks' columns in order, its own renamed, the others' NULL (`frames`: each sink's
    rows in a batch, whose names and types every batch shares)."""
    names, own = [], []
    for k, (df, (stream, sink)) in enumerate(zip(frames, sinks.items(), strict=True)):
        extra = (ERR, SPLIT_EVENT) if stream in split else ()
        columns = df.columns
        sources = [*columns[: sink.width], *sink.order, *extra]  # what `sink.collected` selects
        names.append(collected_names(columns, sink.width, sink.order, *extra))
        own.append([F.col(c).alias(f"__s{k}_{i}") for i, c in enumerate(sources)])
    types = [df.select(*cols).schema for df, cols in zip(frames, own, strict=True)]
    nulls = [[F.lit(None).cast(f.dataType).alias(f.name) for f in t.fields] for t in types]
    parts = []
    for k in range(len(own)):
        cols = [F.lit(k).alias(_SINK)]
        for j in range(len(own)):
            cols += own[k] if j == k else nulls[j]
        parts.append(cols)
    return names, parts


def apart(table: pa.Table, k: int, columns: list[str]) -> pa.Table:
    """Sink k's rows of a `collected_together` batch, under its own column names."""
    mine = table.filter(pc.equal(table.column(_SINK), k))
    return mine.select([f"__s{k}_{i}" for i in range(len(columns))]).rename_columns(columns)


@dataclass(frozen=True)
class DriverSplit:
    """A sink of the shared query that splits the failures of the Map or Filter `node` its rows come
    from on the driver (deployer.spark.run.driver_split), writing them to `dead`."""

    node: str
    dead: DeadLetterWriter
    fixed: dict[str, Any]  # their stage, stream, node and line (`where_failed`)
    memo: dict[tuple[str, str], Any] = field(default_factory=dict)  # its graph's Columns, every batch


def driver_splits(
    graph: g.Graph,
    query: str,
    writes: Sequence[str],
    labels: Sequence[str],
    dead: Callable[[str], DeadLetterWriter],
) -> dict[str, DriverSplit]:
    """The sinks of the shared query `query` that split the failures of a step of `labels` on the
    driver (deployer.spark.run.driver_split), each with its step's dead letters' writer, `dead(label)`."""
    steps = split_steps(graph, query, writes, labels).items()
    return {s: DriverSplit(n, dead(f"stateless-{n}"), where_failed(graph.node(n))) for s, n in steps}


def split_collected(data: pa.Table, fixed: dict[str, Any]) -> tuple[pa.Table, list[str]]:
    """A batch collected with its rows' errors and failed events (ERR, SPLIT_EVENT): the rows that
    did not fail, without those columns, and the dead letters of those that did (`fixed`: their
    stage, stream, node and line), made from their collected values as a task that spools makes
    them (`arrow_letters`)."""
    failed = pc.is_valid(data.column(ERR))
    letters: list[str] = []
    if pc.any(failed).as_py():
        (rows,) = data.filter(failed).select([ERR, SPLIT_EVENT]).combine_chunks().to_batches()
        letters = arrow_letters(rows, ERR, SPLIT_EVENT, fixed)
    return data.filter(pc.invert(failed)).drop_columns([ERR, SPLIT_EVENT]), letters


def shared_writer(
    graph: g.Graph,
    inputs: list[str],
    writers: Mapping[str, DriverSink],
    plan: Callable[[dict[str, DataFrame]], SparkGraph],
    report: Callable[[int, Report], None],
    split: Mapping[str, DriverSplit] | None = None,
) -> Writer:
    """foreachBatch of the shared query: persist the batch, write every sink of `writers` (stream ->
    its writer, the same as a query of its own would use) from it, then `report` the batch. `plan`
    makes the batch's SparkGraph from the source events. The sinks of `split` bring the failures
    of the step their rows come from with them, written as dead letters after their rows.

    The sinks' rows come to the driver in one job (`collected_together`): each job costs a
    micro-batch tens of milliseconds of scheduling whatever its rows (bench/run's "3 sinks of a
    MultiFilter"). The rows out are what the writers say they wrote. An Observation per sink counted
    them before, at the cost of a DataFrame to analyse and a metric to collect per sink and
    micro-batch."""
    cuts = split or {}
    memo: dict[str, Any] = {}  # collected_together's, every batch

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            sg = plan(unstem(batch, inputs))
            sg.observations = {}  # the Filters count in Observations: batch DataFrames report no progress
            together, names = collected_together(sg, graph, writers, cuts, memo)
            table = together.toArrow()
            out = 0
            for k, (stream, sink) in enumerate(writers.items()):
                rows = apart(table, k, names[k])
                cut = cuts.get(stream)
                if cut is None:
                    out += sink.write(rows, batch_id)
                    continue
                rows, failed = split_collected(rows, cut.fixed)
                out += sink.write(rows, batch_id)
                if failed:  # after the sink's rows, as its own query writes them (failures.py)
                    cut.dead.lines(failed, batch_id)
            dropped = {node: observed(obs) for node, obs in sg.observations.items()}
            if not out and not any(dropped.values()):
                # No sink wrote a row and no Filter counted what it dropped, so perhaps no sink's
                # plan ran (the optimizer folds a plan that can have no row to nothing): the batch
                # must run all the same, or a Sequencer's state in it would not commit the batch
                # (Spark fails the query: STATE_STORE_COMMIT_VALIDATION_FAILED) and the events it
                # holds would not move on. A Filter's count says a job ran its plan over the batch,
                # which then ran whole into its cache: a batch whose events every WHERE drops needs
                # no job of its own (an empty count, `{}`, is no such proof: see `observed`).
                batch.count()
            report(
                batch_id,
                Report({node: int(m.get("rows") or 0) for node, m in dropped.items() if m is not None}, out),
            )
        finally:
            batch.unpersist()

    return write
