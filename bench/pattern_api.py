"""Which of Spark's stateful-processor APIs the Pattern operator runs on: the row-based
`transformWithState` (what deployer.spark.patterns uses) against `transformWithStateInPandas`, the
same processor behind an adapter that takes and gives pandas frames, on the same 3-step partitioned
pattern over 10,000 keys, interleaved rounds in one session (docs/architecture.md, "Patterns on
Spark").

    .venv/bin/python bench/pattern_api.py [--quick]

The automaton takes one event at a time: there is nothing to vectorise, so a pandas frame per key
is only a conversion (Arrow to pandas, each row to a dict, the output back to a frame), paid per key
and per value.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import pandas as pd  # noqa: E402
from pyspark.sql import DataFrame, GroupedData, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from spark_workloads import measure  # noqa: E402

from cpl.compiler import compile_script  # noqa: E402
from deployer.spark.handlers import spark_graph  # noqa: E402
from deployer.spark.patterns import translate  # noqa: E402
from deployer.spark.patterns.processor import PatternProcessor  # noqa: E402
from deployer.spark.translate.columns import col_name  # noqa: E402
from deployer.spark.translate.graph import SEQ  # noqa: E402

KEYS = 10_000
SCRIPT = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, ts timestamp
  TIMESTAMP BY ts;
INSERT INTO m SELECT e1.idcaller AS c, e2.idreceiver AS r, e3.duration AS d, match_time() AS t
FROM PATTERN EVERY e1=cdr[duration > 500] -> e2=cdr[idreceiver = e1.idreceiver] -> e3=cdr[duration < 50]
  WITHIN 10 MINUTES PARTITION BY idcaller;
"""


class PandasPatternProcessor(PatternProcessor):
    """The same processor for `transformWithStateInPandas`: each key's frames as rows (dicts, which
    the processor reads as it reads Rows), its rows back as one frame."""

    def _frame(self, rows: Iterator[Any]) -> Iterator[pd.DataFrame]:
        out = [r.asDict() for r in rows]
        if out:
            yield pd.DataFrame(out, columns=self.out_names)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        # the frames' columns come named by position: the grouping key, then translate's columns
        names = ["__key", "__inp", "__t", SEQ, *(f"__e{j}" for j in range(len(self.node.inputs)))]
        events = (r for frame in rows for r in frame.set_axis(names, axis=1).to_dict("records"))
        yield from self._frame(super().handleInputRows(key, events, timerValues))

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
        yield from self._frame(super().handleExpiredTimer(key, timerValues, expiredTimerInfo))


def _events(spark: SparkSession, rows: int) -> DataFrame:
    """CDR-shaped rows over KEYS callers, 1 ms apart; one in five fits the first step, receivers
    link the second, one in ten closes the third."""
    df = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 2)
        .load()
    )
    v = F.col("value")
    return df.select(
        (v % KEYS).cast("int").alias(col_name(0)),
        ((v / KEYS) % 7).cast("int").alias(col_name(1)),
        ((v * 7919) % 600).cast("int").alias(col_name(2)),
        F.timestamp_millis(v).alias(col_name(3)),
        F.format_string("%020d", v).alias(SEQ),
    )


def job(pandas: bool) -> Callable[[SparkSession, int], DataFrame]:
    graph = compile_script(SCRIPT).graph

    def build(spark: SparkSession, rows: int) -> DataFrame:
        source = _events(spark, rows).withWatermark(col_name(3), "0 milliseconds")
        if not pandas:
            return spark_graph(graph, {"cdr": source}).port(graph.streams["m"])
        row_api = GroupedData.transformWithState
        translate.PatternProcessor = PandasPatternProcessor  # type: ignore[misc]
        GroupedData.transformWithState = GroupedData.transformWithStateInPandas  # type: ignore[method-assign]
        try:
            return spark_graph(graph, {"cdr": source}).port(graph.streams["m"])
        finally:
            GroupedData.transformWithState = row_api  # type: ignore[method-assign]
            translate.PatternProcessor = PatternProcessor  # type: ignore[misc]

    return build


def run(spark: SparkSession, quick: bool) -> dict[str, Any]:
    rows, batches, rounds = (20_000, 2, 1) if quick else (50_000, 3, 3)
    got: dict[str, list[float]] = {"row-based transformWithState": [], "transformWithStateInPandas": []}
    with tempfile.TemporaryDirectory(prefix="cep-bench-api-") as tmp:
        for r in range(rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            for pandas in order:
                name = "transformWithStateInPandas" if pandas else "row-based transformWithState"
                res = measure(spark, job(pandas), rows, batches, f"{tmp}/{name}-{r}")
                got[name].append(res["events_per_s"])
    med = {k: statistics.median(v) for k, v in got.items()}
    return {
        "keys": KEYS,
        "rows_per_batch": rows,
        "rounds": got,
        "median_events_per_s": med,
        "ratio_row_over_pandas": med["row-based transformWithState"] / med["transformWithStateInPandas"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    from deployer.spark.run.session import spark_session
    from deployer.spark.run.stop import stop_session

    with tempfile.TemporaryDirectory(prefix="cep-bench-api-") as tmp:
        spark = spark_session("local[2]", "paascep-bench", log=Path(tmp) / "spark.log")
        try:
            print(json.dumps(run(spark, args.quick), indent=2))
        finally:
            stop_session(spark)


if __name__ == "__main__":
    main()
