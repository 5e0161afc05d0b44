"""TUPLE windows of many groups at once (deployer.spark.windows.tuple_buckets), without Spark: the processor's
step, fed micro-batch after micro-batch with its own state, against a plain model of the windows
(per group, in arrival order: fire when SIZE events are buffered, then drop ADVANCE of them, or
skip the events of the gap when ADVANCE > SIZE). Spark runs it in tests/spark/test_spark_windows.py."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from deployer.spark.streams.arrow_batches import packed, unpacked
from deployer.spark.windows.reduce import AggSpec
from deployer.spark.windows.tuple_buckets import BucketedTuple, loaded, stored_state
from operators.datatypes import T_BIGINT, T_DOUBLE

AGGS: list[AggSpec] = [
    AggSpec("sum", "_v0", T_BIGINT, T_BIGINT, "sum(v0)"),
    AggSpec("count", "_v0", T_BIGINT, T_BIGINT, "count(v0)"),
    AggSpec("min", "_v1", T_DOUBLE, T_DOUBLE, "min(v1)"),
    AggSpec("max", "_v0", T_BIGINT, T_BIGINT, "max(v0)"),
    AggSpec("avg", "_v1", T_DOUBLE, T_DOUBLE, "avg(v1)"),
    AggSpec("count", None, T_BIGINT, None, "count(*)"),
]
BUF = T.StructType(
    [
        T.StructField("_v0", T.LongType()),
        T.StructField("_v1", T.DoubleType()),
        T.StructField("__seq", T.StringType()),
    ]
)
OUT = ["_k0", *[f"_a{j}" for j in range(len(AGGS))], "__seq"]
ERR = "__aggerr"  # why a window's row is an error (an aggregate overflowed): none here

Event = tuple[int | None, int | None, float | None, str]  # key, v0, v1, seq


def model(events: list[Event], size: int, advance: int) -> Counter[tuple[Any, ...]]:
    buffers: dict[Any, list[Event]] = {}
    skips: dict[Any, int] = {}
    out: Counter[tuple[Any, ...]] = Counter()
    for e in sorted(events, key=lambda e: e[3]):
        k = e[0]
        if skips.get(k, 0):
            skips[k] -= 1
            continue
        buf = buffers.setdefault(k, [])
        buf.append(e)
        if len(buf) < size:
            continue
        v0 = [x[1] for x in buf if x[1] is not None]
        v1 = [x[2] for x in buf if x[2] is not None]
        out[
            _row(
                k,
                sum(v0) if v0 else None,
                len(v0),
                min(v1) if v1 else None,
                max(v0) if v0 else None,
                sum(v1) / len(v1) if v1 else None,
                size,
                buf[-1][3],
            )
        ] += 1
        buffers[k] = buf[advance:]
        skips[k] = max(advance - size, 0)
    return out


def _row(*values: Any) -> tuple[Any, ...]:
    return tuple(round(v, 6) if isinstance(v, float) else v for v in values)


def table(events: list[Event]) -> pa.Table:
    return pa.table(
        {
            "__group": pa.array(["null" if e[0] is None else str(e[0]) for e in events]),
            "_k0": pa.array([e[0] for e in events], type=pa.int32()),
            "_v0": pa.array([e[1] for e in events], type=pa.int64()),
            "_v1": pa.array([e[2] for e in events], type=pa.float64()),
            "__seq": pa.array([e[3] for e in events]),
        }
    )


def run(events: list[Event], cuts: list[int], size: int, advance: int) -> Counter[tuple[Any, ...]]:
    proc = BucketedTuple(size, advance, AGGS, BUF, [*OUT, ERR], ["__bucket", "__events"])
    state = None
    out: Counter[tuple[Any, ...]] = Counter()
    for lo, hi in zip([0, *cuts], [*cuts, len(events)], strict=True):
        batch = events[lo:hi]
        if not batch:
            continue
        random.Random(hi).shuffle(batch)  # arrival order is the sequence id, not the row order
        result, kept = proc._step(table(batch), state)
        # through the state store's form, as between two micro-batches on Spark
        state = loaded(stored_state(kept)) if kept is not None else None
        if result is not None:
            for r in pd.DataFrame({c: result[c] for c in [*OUT, ERR]}).to_dict("records"):
                assert r[ERR] is None
                out[_row(*[None if isinstance(r[c], float) and math.isnan(r[c]) else r[c] for c in OUT])] += 1
    return out


@pytest.mark.parametrize(("size", "advance"), [(1, 1), (3, 3), (4, 2), (2, 5), (5, 1), (3, 4)])
@pytest.mark.parametrize("seed", range(4))
def test_windows_of_many_groups_across_micro_batches_equal_the_model(
    size: int, advance: int, seed: int
) -> None:
    rnd = random.Random(seed * 100 + size * 10 + advance)
    events: list[Event] = []
    for i in range(rnd.randint(0, 120)):
        key = rnd.choice([None, 1, 2, 3, 4, 5, 6, 7]) if seed else rnd.choice([1, 2])
        v0 = None if rnd.random() < 0.15 else rnd.randint(-(2**40), 2**40)
        v1 = None if rnd.random() < 0.15 else rnd.uniform(-100, 100)
        events.append((key, v0, v1, f"{i:06d}"))
    cuts = sorted(rnd.sample(range(len(events) + 1), min(5, len(events) + 1)))
    assert run(events, cuts, size, advance) == model(events, size, advance)


def test_integers_beyond_a_double_stay_exact() -> None:
    big = 2**62 + 1
    events: list[Event] = [(1, big, None, "a"), (1, None, 1.0, "b"), (1, 1, 2.0, "c")]
    got = run(events, [1, 2], 3, 3)
    assert list(got) == [_row(1, big + 1, 2, 1.0, big, 1.5, 3, "c")]


def test_packed_rows_come_back_by_bucket_with_their_types_and_nulls() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "__bucket": pa.array([3, 1, 3, 2, 1], type=pa.int64()),
            "x": pa.array([1, None, 3, 2**60, 5], type=pa.int64()),
            "s": ["a", "b", None, "d", "é"],
        }
    )
    p = packed(batch, "__bucket")
    assert p.column("__bucket").to_pylist() == [1, 2, 3]
    blobs = p.column("__events").to_pylist()
    assert unpacked([blobs[0]]).to_pydict() == {"x": [None, 5], "s": ["b", "é"]}
    assert unpacked(blobs).column("x").type == pa.int64()
    assert sorted(unpacked(blobs).column("x").to_pylist(), key=str) == sorted([1, None, 3, 2**60, 5], key=str)
