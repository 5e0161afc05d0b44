"""A streaming query's own session settings: Spark clones the session as a query starts, so what is
set on it then is that query's for its life (its shuffle partitions, whether it runs empty batches),
and Spark hands every setting whose name starts with `spark` to its tasks as a local property, where
deployer.spark.streams.spool.QUERY tells a task which query it runs for."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from deployer.spark.run.partitions import state_partitions
from deployer.spark.run.queries import Query
from deployer.spark.run.watermarks import runs_empty_batches
from deployer.spark.streams.task_spool import QUERY
from operators import graph as g

_PARTITIONS = "spark.sql.shuffle.partitions"
_NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
_LOCK = threading.Lock()  # a query takes the session's settings as it starts: one start at a time


def started_with(writer: Any, conf: Any, wanted: Mapping[str, str]) -> StreamingQuery:
    """`writer` (a DataStreamWriter) started with `wanted` set on the session (`conf`, its
    RuntimeConfig), which is then as it was."""
    with _LOCK:
        before = {k: conf.get(k, None) for k in wanted}
        for k, v in wanted.items():
            conf.set(k, v)
        try:
            return writer.start()
        finally:
            for k, v in before.items():
                if v is None:
                    conf.unset(k)
                else:
                    conf.set(k, v)


def query_settings(
    graph: g.Graph, planned: Query | None, df: DataFrame, keyed: int, name: str
) -> dict[str, str]:
    """The settings query `name` of `graph` (`planned`, None for a query of no plan) starts with:
    its state partitions (deployer.spark.run.partitions; `keyed`: those of a query whose keys
    spread), whether it runs empty batches, whether it reuses a shuffle of `df`'s plan that it
    computes twice (`reuses_exchanges`), and which query it is for the tasks that spool."""
    stateful = planned is None or bool(planned.stateful)
    return {
        _PARTITIONS: str(state_partitions(graph, planned, keyed)),
        _NO_DATA_BATCHES: "true" if runs_empty_batches(graph, planned) else "false",
        "spark.sql.exchange.reuse": str(not stateful or reuses_exchanges(df)).lower(),
        QUERY: name,  # which of the queries that pass a spooling stage writes its dead letters
    }


_WATERMARK = re.compile(r"EventTimeWatermark ([0-9a-f-]{36})")  # the node's id, as Spark prints it


def reuses_exchanges(df: DataFrame) -> bool:
    """Whether the query of `df` may reuse a shuffle it computes twice (`spark.sql.exchange.reuse`).

    Spark's propagation of watermarks between stateful operators does not look through a reused
    exchange (a leaf of the plan it walks), so an operator above one whose input holds a watermark
    saw the watermark 0, and an OUTPUT limit or a TIME window there lost its rows (fuzzer seed 42001:
    one stream read on two paths). A duplicated exchange duplicates all below it, so when no
    watermark is in the plan twice, no reused exchange can hide one: the streams of a merge, whose
    Sequencers read one shuffle of their sources (deployer.spark.streams.merge_sequencer), read and
    parse them once, where each Sequencer read them again (and Spark's progress counted every read:
    a 3-stream pattern's input rows and rates three times). (A stateless query has no watermark to
    lose: deployer.spark.run.deployment keeps its reuse without asking.)"""
    ids = _WATERMARK.findall(df._jdf.queryExecution().analyzed().toString())
    return len(ids) == len(set(ids))
