"""What Spark's stateful-processor API costs by itself, on the 3-step pattern's input: the ceiling that
any pattern job written in Python on Spark works under (bench/pattern_workloads reports the project
against it).

Two processors that do no matching, over the same events grouped by the same key as the project's
pattern: one that only reads each key's rows (the API's cost of calling Python per key and handing it
its rows), and one that also reads and writes a small value state per key (the state round trips
every stateful job pays). The project's figure against them says how much of a micro-batch is the
automaton's and how much the API's; the two batch sizes, how the per-key cost is shared out as a
key gets more events per micro-batch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from pattern_baseline import Feed
from pyspark import cloudpickle
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

# Spark's Python workers cannot import bench/'s modules: the processors travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

_COUNT = T.StructType([T.StructField("n", T.LongType())])
_OUT = T.StructType([T.StructField("k", T.IntegerType())])


class ReadOnly(StatefulProcessor):
    """Reads a key's rows and writes nothing."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        for _ in rows:
            pass
        return iter(())

    def close(self) -> None:
        pass


class ReadWrite(ReadOnly):
    """Reads a key's rows, and its count of rows so far from the state, which it writes back."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("n", _COUNT)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        n = sum(1 for _ in rows)
        old = self.state.get()
        self.state.update(((old[0] if old is not None else 0) + n,))
        return iter(())


PROCESSORS = {
    "reads each key's rows": ReadOnly,
    "reads the rows, gets and updates a state": ReadWrite,
}


def api_job(feed: Feed, processor: type[StatefulProcessor]) -> Any:
    """A bench/pattern_workloads Build: `feed`'s events by caller through `processor`."""

    def build(spark: SparkSession, rows: int) -> DataFrame:
        df = feed.frame(spark, rows)
        return df.groupBy("idcaller").transformWithState(processor(), _OUT, "append", "None")

    return build
