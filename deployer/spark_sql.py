"""ReadSQL, UpdateSQL and Materialize on Spark: the stores layer driven once per Arrow batch.

ReadSQL and UpdateSQL run inside `mapInArrow`: each Arrow batch of events becomes one call of
`Stores.read` / `Stores.update`, which on Postgres is one round trip (DESIGN.md decisions 4 and 5).
The stores object is created once per Python worker process from picklable bindings and reused,
so connections are pooled per executor process. Materialize writes each micro-batch through
`Stores.materialize` from `foreachBatch`.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from deployer.spark_expr import ExprCompiler, col_name, spark_type, struct_of
from operators import graph as g

if TYPE_CHECKING:
    from deployer.spark_plan import SparkGraph

_STORES: dict[int, Any] = {}


def _stores(config: Any) -> Any:
    """One registry per worker process and configuration (pooled connections are reused)."""
    from stores.registry import StoreRegistry

    # pickle, not repr: a URL's repr hides its password, and two passwords are two configurations
    key = hash(pickle.dumps(config))
    if key not in _STORES:
        bindings, declared = config
        _STORES[key] = StoreRegistry(bindings, declared)
    return _STORES[key]


def _config(sg: SparkGraph) -> Any:
    if sg.stores_config is None:
        raise ValueError("this script uses data stores; they must be bound before it runs on Spark")
    return sg.stores_config


def _with_args(sg: SparkGraph, node: g.ReadSQL | g.UpdateSQL) -> tuple[DataFrame, int]:
    from deployer.spark_plan import SEQ

    df = sg.input(node)
    c = ExprCompiler()
    args = [c.compile(a).cast(spark_type(a.type)).alias(f"__p{i}") for i, a in enumerate(node.args)]
    width = len(node.input_schema)
    return df.select(*[col_name(i) for i in range(width)], SEQ, *args), width


def read_sql(sg: SparkGraph, node: g.ReadSQL) -> DataFrame:
    from deployer.spark_plan import SEQ

    config = _config(sg)
    df, width = _with_args(sg, node)
    out_fields = [*struct_of(node.schema).fields, T.StructField(SEQ, T.StringType())]
    out = T.StructType(out_fields)
    arrow_schema = pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in out_fields]
    )
    n_args = len(node.args)
    query = node.query
    outer = node.outer
    n_result = len(node.result_fields)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stores = _stores(config)
        for batch in batches:
            rows = batch.to_pylist()
            if not rows:
                continue
            params = [tuple(r[f"__p{i}"] for i in range(n_args)) for r in rows]
            results = stores.read(query, params)
            cols: list[list[Any]] = [[] for _ in out_fields]
            for r, found in zip(rows, results, strict=True):
                event = [r[col_name(i)] for i in range(width)]
                matches = found if found or not outer else [(None,) * n_result]
                for k, m in enumerate(matches):
                    for i, v in enumerate(event):
                        cols[i].append(v)
                    for j in range(n_result):
                        cols[width + j].append(m[j] if j < len(m) else None)
                    cols[-1].append(f"{r[SEQ]}#{k}")
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(cols, arrow_schema, strict=True)],
                schema=arrow_schema,
            )

    return df.mapInArrow(run, out)


def update_sql(sg: SparkGraph, node: g.UpdateSQL) -> DataFrame:
    from deployer.spark_plan import SEQ

    config = _config(sg)
    df, width = _with_args(sg, node)
    out_fields = [*struct_of(node.schema).fields, T.StructField(SEQ, T.StringType())]
    out = T.StructType(out_fields)
    arrow_schema = pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC")) for f in out_fields]
    )
    n_args = len(node.args)
    query = node.query
    with_count = node.count_field is not None

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stores = _stores(config)
        for batch in batches:
            rows = sorted(batch.to_pylist(), key=lambda r: r[SEQ])  # statements take effect in event order
            if not rows:
                continue
            counts = stores.update(query, [tuple(r[f"__p{i}"] for i in range(n_args)) for r in rows])
            cols: list[list[Any]] = [[] for _ in out_fields]
            for r, n in zip(rows, counts, strict=True):
                for i in range(width):
                    cols[i].append(r[col_name(i)])
                if with_count:
                    cols[width].append(n)
                cols[-1].append(r[SEQ])
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(cols, arrow_schema, strict=True)],
                schema=arrow_schema,
            )

    return df.mapInArrow(run, out)


def materialize_writer(sg: SparkGraph, node: g.Materialize) -> Any:
    config = _config(sg)
    table = node.table
    columns = node.input_schema.names

    def write(df: DataFrame, batch_id: int) -> None:
        rows = [tuple(r) for r in df.toLocalIterator()]
        if rows:
            _stores(config).materialize(table, columns, rows)

    return write
