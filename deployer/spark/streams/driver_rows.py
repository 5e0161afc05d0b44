"""A micro-batch's rows on the driver, in the reference executor's order: what every sink writes.

The rows come to the driver anyway (a file, the console, a Redis stream), so they are collected as
Arrow and sorted there, only when out of order: Spark's orderBy would sample the batch in a job of
its own, then shuffle it, in every micro-batch of every sink.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deployer.spark.streams.arrow_batches import in_order
from stores.arrow import rows as arrow_rows


def ordered_values(df: DataFrame, width: int, order: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """The first `width` columns of a batch (positional `_0.._n` or named), sorted by the `order`
    columns as the reference executor emits them (event time, then arrival; NULLs first)."""
    keys = [f"__order{k}" for k in range(len(order))]
    cols = [df[c] for c in df.columns[:width]]
    cols += [F.col(c).alias(key) for c, key in zip(order, keys, strict=True)]
    # Arrow: epoch microseconds whatever the driver's time zone, converted column by column
    # (stores/arrow.py: aware UTC datetimes), ~10x faster than toLocalIterator's pickled Rows
    yield from arrow_rows(in_order(df.select(*cols).toArrow(), tuple(keys)))
