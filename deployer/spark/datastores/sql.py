"""ReadSQL, UpdateSQL and Materialize on Spark: the stores layer driven once per Arrow batch.

ReadSQL and UpdateSQL run inside `mapInArrow`: each Arrow batch of events becomes one call of
`Stores.read` / `Stores.update`, which on Postgres is one round trip (docs/architecture.md, decision 4 and 5).
The stores object is created once per Python worker process from picklable bindings and reused,
so connections are pooled per executor process. Materialize writes each micro-batch through
`Stores.materialize` from `foreachBatch`.

Exactly-once in effect (docs/architecture.md, decision 6, stores/ledger.py):

- UpdateSQL passes each event's `__seq` (deterministic, the same when Spark replays a batch) as its
  event id, under the scope (deployment, node id). Spark recomputes an UpdateSQL for every query
  downstream of it (each sink and table is a query of its own, as the dead letters may be) and for every replayed
  batch; the ledger makes all of them but the first return the recorded counts, executing nothing.
- Materialize passes (deployment, node id, batch id): a replayed batch writes nothing.

The deployment name comes from `sg.deployment` when the deployer sets it, else from a
`stores.bindings.StoreBindings`, else it is `cep-<digest of the compiled graph>`. Two different
scripts must not run under one deployment name against the same stores: the second would find the
first one's entries for the same event ids and skip its own writes.

Per-event failures: an UpdateSQL event the database refuses (a constraint, a bad cast) is split off
into a dead letter with the database's (redacted) message; a Materialize row likewise, written by
the `dead_letter` writer given to `materialize_writer` (stderr without one). A ReadSQL event whose
read the database refuses for its data (the store splits the batch around it: stores.api.split_reads),
whose rows have another number of columns than ON SQL names, or with a result value that does not
fit its field (operators.results) comes out of Python as one row with the reason, split off into a
dead letter with the whole event, as the reference executor does. Any other store error (a missing
table, SQL the database refuses, the store unreachable after the retries, a column whose type changed
since the script was compiled) fails the task, and the query stops with it (docs/guarantees.md).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from deployer.spark import faults
from deployer.spark.datastores.store_calls import bound, deployment_of, worker_stores
from deployer.spark.streams.arrow_batches import coalesced
from deployer.spark.streams.task_spool import InStage
from deployer.spark.translate.batch_order import batch_order
from deployer.spark.translate.columns import carried, col_name, spark_type, struct_of
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.graph import SEQ, SparkGraph
from operators import graph as g
from operators.analysis import vouched_results
from operators.results import TypeChanged, Vouched, result_columns
from stores import ledger
from stores.api import ReadColumns, UpdateResult
from stores.errors import NUL_IN_TEXT, StoreSchemaError

_STORES: dict[int, Any] = {}
SQL_ERR = "__sqlerr"  # UpdateSQL: why the database refused the event, NULL when it did not
READ_ERR = "__readerr"  # ReadSQL: why the event is dead-lettered (store or result value), else NULL
# Events per ReadSQL query on Spark (see deployer.spark.streams.arrow_batches.coalesced): in the sql bench, 50,000 and 100,000 read
# faster than Spark's 10,000 and about alike; above that the gain stops.
READ_BATCH_ROWS = 100_000


def _with_args(sg: SparkGraph, node: g.ReadSQL | g.UpdateSQL) -> tuple[DataFrame, int]:
    """The node's input with its arguments as `__p0`, `__p1`, ..., and its width."""
    df = sg.input(node)
    c = ExprCompiler()
    compiled = [c.compile(a).cast(spark_type(a.type)) for a in node.args]
    args = [a.alias(f"__p{i}") for i, a in enumerate(compiled)]
    width = len(node.input_schema)
    errors = list(c.errors)
    if isinstance(node, g.ReadSQL):
        errors += _unsendable(sg, node, compiled)
    # an argument that fails (e.g. division by zero) dead-letters its event, as in the reference
    df = sg.split_errors(node, df, errors, width, on_input=True)
    return df.select(*[col_name(i) for i in range(width)], SEQ, *args), width


def _unsendable(sg: SparkGraph, node: g.ReadSQL, args: list[Column]) -> list[tuple[Column, str]]:
    """Postgres text cannot hold a NUL character, and psycopg refuses to send one: a ReadSQL event
    with a NUL in a text parameter is dead-lettered with the reason the reference executor gives
    (see SqlStore.read), found here by a column expression so that the read itself, one query per
    batch, never sees it and the dead letter needs no second read."""
    urls = bound(sg).urls
    url = next((u for name, u in urls.items() if name.lower() == node.query.store.lower()), None)
    if url is None or url.kind != "postgresql":
        return []
    where = f"store {node.query.store} ({url.redacted()}): query {node.query.name}"
    return [
        (F.coalesce(F.instr(a, "\u0000") > 0, F.lit(False)), f"{where}, parameter {i + 1}: {NUL_IN_TEXT}")
        for i, (a, e) in enumerate(zip(args, node.args, strict=True))
        if e.type.is_string
    ]


def read_sql(sg: SparkGraph, node: g.ReadSQL) -> DataFrame:
    # Any event may be dead-lettered, whole (its read refused for its data, a result value that does
    # not fit): the dead letters come from a read that carries every field of the event. The
    # results go on from one where only the event fields read downstream cross to Python and back
    # (the others come back as NULLs no consumer reads), when the dead letters are another query's
    # (deployer.spark.run.queries), so that each read runs once per query. When the tasks of the
    # query that reads the results write them (deployer.spark.streams.spool), the results go on
    # from the whole read: one read.
    df, width = _with_args(sg, node)
    live = sg.live(g.Port(node.id))
    keep = [i for i in range(width) if live is None or i in live]
    fields = carried(list(struct_of(node.schema).fields), df)
    spool = sg.spooled_in_stage(node, READ_ERR, width)
    if spool is not None:  # the read's own stage spools its failures: one Python stage, not two
        return _read(sg, node, df, list(range(width)), fields, spool)
    whole = _read(sg, node, df, list(range(width)), fields)
    err = F.col(READ_ERR)
    ok = sg.split_errors(node, whole, [(err.isNotNull(), err)], width, drops=(READ_ERR,))
    if len(keep) == width or sg.dead_letters[-1].spooled is not None:
        return ok
    done = _read(sg, node, df, keep, fields).filter(err.isNull()).drop(READ_ERR)
    return done.select(
        *[
            F.col(f.name) if i in keep or i >= width else F.lit(None).cast(f.dataType).alias(f.name)
            for i, f in enumerate(fields)
        ],
        SEQ,
    )


def _read(
    sg: SparkGraph,
    node: g.ReadSQL,
    df: DataFrame,
    keep: list[int],
    fields: list[T.StructField],
    spool: InStage | None = None,
) -> DataFrame:
    """The read of `df`'s events (of `_with_args`) with the event fields in `keep`: each result row
    is those fields, the result values, SEQ and READ_ERR (one row of NULL results per event to
    dead-letter, with the reason); with `spool`, the rows with a reason are spooled by the stage
    and the others go on without READ_ERR."""
    config = bound(sg)
    width = len(node.input_schema)
    out_fields = [
        *(fields[i] for i in keep),
        *fields[width:],
        T.StructField(SEQ, T.StringType()),
        T.StructField(READ_ERR, T.StringType()),
    ]
    arrow_schema = pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in out_fields]
    )
    n_args = len(node.args)
    query = node.query
    outer = node.outer
    n_result = len(node.result_fields)
    event_cols = [col_name(i) for i in keep]
    counters = _cache_counters(sg, df, query)
    chunk = READ_BATCH_ROWS
    vouched = vouched_results(node)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Vectorised around the one store call per batch: the event's own columns are gathered
        # with Arrow `take` (one index per result row); only the result values pass through Python.
        stores = worker_stores(config)
        split = spool.splitter() if spool is not None else None
        for batch in coalesced(batches, chunk):
            columns = [_pylist(batch.column(f"__p{i}")) for i in range(n_args)]
            before = stores.cache_stats().get(query.name, {}) if counters else {}
            found = stores.read_columns(query, columns, batch.num_rows, width=n_result, outer=outer)
            if counters:  # the cache lives in this worker: send what this call did to the driver
                after = stores.cache_stats().get(query.name, {})
                for acc, what in zip(counters, ("hits", "misses", "loads"), strict=True):
                    acc.add(after.get(what, 0) - before.get(what, 0))
            rows = _read_rows(node, batch.select([*event_cols, SEQ]), found, arrow_schema, vouched)
            yield rows if split is None else split(rows)

    declared = out_fields if spool is None else out_fields[:-1]  # READ_ERR last
    return df.select(*event_cols, SEQ, *[f"__p{i}" for i in range(n_args)]).mapInArrow(
        run, T.StructType(declared)
    )


def _read_rows(
    node: g.ReadSQL, events: pa.RecordBatch, found: ReadColumns, schema: pa.Schema, vouched: Vouched
) -> pa.RecordBatch:
    """The output of one store call: each result row is its event's columns (and `SEQ`, last in
    `events`) followed by its values, as their fields' types (operators.results, as the reference
    executor gives them); an event the store refused, or with a value that does not fit, is one
    row of NULL results with the reason (READ_ERR), for the dead letter. A value that does not fit a
    column the store vouched for stops the query, as it stops the reference executor."""
    names = [f.name for f in node.result_fields]
    types = [f.type for f in node.result_fields]
    try:
        rows, columns, reasons = result_columns(
            node.query.name, names, types, found.event, found.columns, found.errors, vouched
        )
    except TypeChanged as err:
        raise StoreSchemaError(str(err), store=node.query.store) from None
    event = np.asarray(rows, dtype=np.int64)
    taken = events.take(pa.array(event))
    n_kept = events.num_columns - 1
    arrays = [taken.column(i) for i in range(n_kept)]
    arrays += [pa.array(v, type=schema.field(n_kept + j).type) for j, v in enumerate(columns)]
    arrays.append(pc.binary_join_element_wise(taken.column(n_kept), _nth(event), ""))
    arrays.append(pa.array(reasons, type=pa.string()))
    return pa.RecordBatch.from_arrays(
        [a.cast(f.type) if a.type != f.type else a for a, f in zip(arrays, schema, strict=True)],
        schema=schema,
    )


def _pylist(column: pa.Array) -> list[Any]:
    """The values of an Arrow column as Python objects; numbers without nulls through numpy, which
    makes them at C speed (Arrow's `to_pylist` builds a scalar per value: the largest Python cost of
    a read, after the database's own time)."""
    if column.null_count == 0 and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        return column.to_numpy().tolist()
    return column.to_pylist()


def _nth(event: np.ndarray) -> pa.Array:
    """'#k' for the k-th result row (from 0) of each event, given each row's event in event order:
    appended to the event's sequence id, it keeps the ids of an event's result rows distinct."""
    if len(event) == 0:
        return pa.array([], type=pa.string())
    pos = np.arange(len(event))
    first = np.ones(len(event), dtype=bool)
    first[1:] = event[1:] != event[:-1]
    k = pos - np.maximum.accumulate(np.where(first, pos, 0))
    return pc.binary_join_element_wise("#", pc.cast(pa.array(k), pa.string()), "")


def _cache_counters(sg: SparkGraph, df: DataFrame, query: g.SqlQuery) -> tuple[Any, Any, Any] | None:
    """The accumulators of a cached query's hits, misses and loads (one set per query name)."""
    if not query.cache_rows:
        return None
    if query.name not in sg.cache_counters:
        sc = df.sparkSession.sparkContext
        sg.cache_counters[query.name] = (sc.accumulator(0), sc.accumulator(0), sc.accumulator(0))
    return sg.cache_counters[query.name]


def _updated_rows(
    events: pa.RecordBatch, result: UpdateResult, with_count: bool, schema: pa.Schema
) -> pa.RecordBatch:
    """The output of one batch of statements: each event's columns (and SEQ, last in `events`), its
    affected-row count when the statement names one, and SQL_ERR (why it failed, or NULL)."""
    width = events.num_columns - 1
    arrays = [events.column(i) for i in range(width)]
    if with_count:
        arrays.append(pa.array(result.counts, type=schema.field(width).type))
    arrays.append(events.column(width))
    arrays.append(pa.array(result.errors, type=pa.string()))
    return pa.RecordBatch.from_arrays(
        [a.cast(f.type) if a.type != f.type else a for a, f in zip(arrays, schema, strict=True)],
        schema=schema,
    )


def _statement_order(sg: SparkGraph, node: g.UpdateSQL) -> list[tuple[str, str]]:
    """The sort keys that put a micro-batch of the update's events in the order the reference runs
    their statements (`batch_order`), as the shuffle to the update's one partition keeps a
    partition's order."""
    return [(column, "ascending") for column in batch_order(sg.graph, node.inputs[0])]


def update_sql(sg: SparkGraph, node: g.UpdateSQL) -> DataFrame:
    config = bound(sg)
    df, width = _with_args(sg, node)
    out_fields = [
        *carried(list(struct_of(node.schema).fields), df),
        T.StructField(SEQ, T.StringType()),
        T.StructField(SQL_ERR, T.StringType()),
    ]
    arrow_schema = pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in out_fields]
    )
    # the stage spools its failed events itself when its query's tasks write them (as a read's)
    spool = sg.spooled_in_stage(node, SQL_ERR, width)
    out = T.StructType(out_fields if spool is None else out_fields[:-1])  # SQL_ERR last
    n_args = len(node.args)
    query = node.query
    with_count = node.count_field is not None
    scope = ledger.scope(deployment_of(sg), node.id)
    order = _statement_order(sg, node)
    fault = faults.after_update_hook(query.name)  # None unless a fault test sets it
    # A micro-batch's events come in several partitions (a file source's groups of files, a merge's
    # inputs), which run side by side, and Spark sorts no streaming DataFrame: one partition, sorted
    # whole, runs the statements in event order, whatever the partitions and the tasks' timing.
    # All the rows in one of two partitions (one hash), not Spark's single partition: with one state
    # partition, every stateful operator after a single partition runs in its task, and Spark 4.1's
    # RocksDB store then refuses the second (a TIME window's aggregation leaves the store it read in
    # the task, StateStoreThreadLocalTracker, which the next operator's state is taken for).
    df = df.repartition(2, F.lit(0))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Column-wise: only the parameters and the event ids pass through Python; the events'
        # own columns are reordered with Arrow `take`.
        stores = worker_stores(config)
        split = spool.splitter() if spool is not None else None
        event_cols = [col_name(i) for i in range(width)]
        for batch in coalesced(batches, sys.maxsize):
            if batch.num_rows == 0:
                continue
            # statements in event order: event time, then arrival (the sources and Sequencers give
            # the events so, micro-batch after micro-batch; a sort keeps it within the batch)
            events = batch.take(pc.sort_indices(batch, sort_keys=order)) if order else batch
            columns = [_pylist(events.column(f"__p{i}")) for i in range(n_args)]
            params = list(zip(*columns, strict=True)) if columns else [()] * events.num_rows
            ids = events.column(SEQ).to_pylist()
            result = stores.update(query, params, event_ids=ids, scope=scope)
            if fault is not None:
                fault()
            rows = _updated_rows(events.select([*event_cols, SEQ]), result, with_count, arrow_schema)
            yield rows if split is None else split(rows)

    done = df.mapInArrow(run, out)
    if spool is not None:
        return done
    # Failed events go to a dead letter, with the input event; the others go on.
    err = F.col(SQL_ERR)
    return sg.split_errors(node, done, [(err.isNotNull(), err)], width, drops=(SQL_ERR,))
