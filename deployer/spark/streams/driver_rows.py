"""A micro-batch's rows on the driver, in the reference executor's order: what every sink writes.

The rows come to the driver anyway (a file, the console, a Redis stream), so they are collected as
Arrow and sorted there, only when out of order: Spark's orderBy would sample the batch in a job of
its own, then shuffle it, in every micro-batch of every sink.

A sink is a `DriverSink`: what to collect of a batch (`collected`) apart from writing what was
collected (`write`), so that the shared query (deployer.spark.run.shared) brings all its sinks' rows
in one job and hands each sink its part.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deployer.spark.streams.arrow_batches import in_order
from stores.arrow import rows as arrow_rows

Rows = list[tuple[Any, ...]]


def _keys(order: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"__order{k}" for k in range(len(order)))


def collected(df: DataFrame, width: int, order: Sequence[str], *extra: str) -> DataFrame:
    """The first `width` columns of a batch (positional `_0.._n` or named), then its `order` columns
    under names of their own (`__order0`...): what `ordered_rows` sorts by; then the `extra` ones."""
    cols = [df[c] for c in df.columns[:width]]
    cols += [F.col(c).alias(key) for c, key in zip(order, _keys(order), strict=True)]
    return df.select(*cols, *extra)


def collected_names(columns: Sequence[str], width: int, order: Sequence[str], *extra: str) -> list[str]:
    """The column names of `collected(df, width, order, *extra)`, `columns` those of `df`."""
    return [*columns[:width], *_keys(order), *extra]


def ordered_rows(table: pa.Table, order: Sequence[str]) -> Rows:
    """The rows of a `collected` table, sorted by its order columns as the reference executor emits
    them (event time, then arrival; NULLs first), without them."""
    # Arrow: epoch microseconds whatever the driver's time zone, converted column by column
    # (stores/arrow.py: aware UTC datetimes), ~10x faster than toLocalIterator's pickled Rows
    return arrow_rows(in_order(table, _keys(order)))


def ordered_values(df: DataFrame, width: int, order: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """The first `width` columns of a batch, sorted by the `order` columns."""
    yield from ordered_rows(collected(df, width, order).toArrow(), order)


@dataclass(frozen=True)
class DriverSink:
    """A sink whose rows come to the driver: a foreachBatch that returns how many rows it wrote.

    `emit` writes a batch's rows, in order, and returns how many it wrote (a replay may write none)."""

    width: int  # the stream's columns, first in the batch
    order: tuple[str, ...]  # the columns the rows are sorted by
    emit: Callable[[Rows, int], int]

    def collected(self, df: DataFrame, *extra: str) -> DataFrame:
        return collected(df, self.width, self.order, *extra)

    def write(self, table: pa.Table, batch_id: int) -> int:
        """Write a batch `collected` and brought to the driver."""
        return self.emit(ordered_rows(table, self.order), batch_id)

    def counting(self, counted: Callable[[int, int], None]) -> DriverSink:
        """This sink, telling `counted` the rows of each batch it writes, and the batch's id."""

        def emit(rows: Rows, batch_id: int) -> int:
            n = self.emit(rows, batch_id)
            counted(n, batch_id)
            return n

        return DriverSink(self.width, self.order, emit)

    def __call__(self, df: DataFrame, batch_id: int) -> int:
        return self.write(self.collected(df).toArrow(), batch_id)
