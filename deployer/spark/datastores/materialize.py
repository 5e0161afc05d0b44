"""Materialize on Spark: each micro-batch of a table's query written through the stores, exactly once.

The batch reaches the store as the Arrow table `toArrow()` collects; the ledger key (deployment, node,
batch id) makes a replayed batch write nothing (stores/ledger.py). Rows the store refuses go to the
dead letter with the store's message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark import faults
from deployer.spark.datastores.store_calls import bound, deployment_of, worker_stores
from deployer.spark.streams.arrow_batches import in_order
from deployer.spark.streams.dead_letters import DeadLetterWriter
from deployer.spark.translate.batch_order import batch_order
from deployer.spark.translate.graph import SparkGraph, named_columns
from operators import graph as g
from stores.arrow import rows as arrow_rows


class TableWriter(Protocol):
    """`materialize_writer`'s foreachBatch: a batch's rows, or the Arrow table of them `collected`."""

    def __call__(self, df: DataFrame, batch_id: int, collected: pa.Table | None = None) -> None: ...


@dataclass(frozen=True)
class TableOutput:
    """How a table's query writes: its rows made the table's by `shape` (`table_shape`), then
    `write` (`materialize_writer`), which may be given the batch collected already."""

    shape: list[Column]
    write: TableWriter


_ORDER = ("__order_ts", "__order_seq")


def table_shape(sg: SparkGraph, node: g.Materialize) -> tuple[list[Column], tuple[str, ...]]:
    """The Columns that make the rows of a table's input the rows its query writes, with the table's
    column names, and the columns after them that `materialize_writer` sorts each batch by: event
    time (when the rows have one) and `SEQ`, the reference executor's order, as a sink writes them. A
    batch of a stream's events comes in that order already, but not one over a merge (its inputs'
    partitions one after another) nor an aggregate's windows (a TIME window's `SEQ` starts with the
    window's end): the rows of one key are upserted in that order, so the last one wins on both
    engines. Made once: a query that splits its rows off its input's failures in each micro-batch
    selects them in each (deployer.spark.run.failures), and each Column made is a round trip to the
    JVM."""
    order = batch_order(sg.graph, node.inputs[0])
    names = _ORDER[len(_ORDER) - len(order) :]  # (SEQ alone is the last)
    return [
        *named_columns(node.input_schema),
        *(F.col(c).alias(n) for c, n in zip(order, names, strict=True)),
    ], names


def materialize_writer(
    sg: SparkGraph,
    node: g.Materialize,
    dead_letter: DeadLetterWriter | None = None,
    applied: Callable[[int, int], None] | None = None,
    order: tuple[str, ...] = (),
) -> TableWriter:
    """foreachBatch: store the batch exactly once (ledger key = deployment, node, batch id).

    Rows the store refuses go to `dead_letter(df, batch_id)` as a DataFrame of `reason` and `event`
    (a struct of the row's values), like SparkGraph's dead letters; without one, to stderr.
    `applied(n, batch id)` is told how many rows of each batch the store accepted (a replayed
    batch's too: its input is counted again by the run that replays it). `order`: columns after the table's, to
    sort each batch by and drop (`table_shape`).
    """
    config = bound(sg)
    table = node.table
    columns = node.input_schema.names
    deployment = deployment_of(sg)
    fallback = DeadLetterWriter(None, node.id, {"stage": node.op, "node": node.id, "line": node.line})
    failed_to = dead_letter or fallback
    fault = faults.after_commit_hook(table.name)  # None unless a fault test sets it

    def write(df: DataFrame, batch_id: int, collected: pa.Table | None = None) -> None:
        # The batch goes to the store as Arrow: Postgres encodes it for COPY with Arrow kernels,
        # other stores convert it to Python rows (stores/arrow.py). Sorted here, on the driver, not
        # with Spark's orderBy, which samples the batch in a job of its own first. `collected`: the
        # batch's rows collected already (its first columns `df`'s: deployer.spark.run.failures).
        data = in_order(df.toArrow() if collected is None else collected, order)
        if not data.num_rows:
            return
        result = worker_stores(config).materialize_arrow(
            table, columns, data, ledger_key=(deployment, node.id, batch_id)
        )
        if fault is not None:
            fault(batch_id)
        failed = result.failed
        if applied is not None:
            applied(data.num_rows - len(failed), batch_id)
        if failed:
            rows = arrow_rows(data.take(pa.array(failed, type=pa.int64())))
            event = T.StructType(
                [T.StructField(f"_{i}", f.dataType) for i, f in enumerate(df.schema.fields[: len(columns)])]
            )
            schema = T.StructType([T.StructField("reason", T.StringType()), T.StructField("event", event)])
            bad = df.sparkSession.createDataFrame(
                [(result.errors[i], r) for i, r in zip(failed, rows, strict=True)], schema
            )
            failed_to(bad, batch_id)

    return write
