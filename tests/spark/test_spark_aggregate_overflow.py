"""Window aggregates on both engines: exact sums and averages of decimals and bigints, and the same
error when one does not fit its type, on the TIME path (native Spark), the TUPLE path per bucket of
groups (numbers) and per group (decimals), and BATCH windows; with every file in one micro-batch
and with one file per micro-batch.

An aggregate that overflows makes its window's row an error (docs/language.md, "Aggregates"): the
row is dead-lettered with the overflowing aggregate NULL and the reason `integer overflow: sum(n)
is out of range for bigint` (`decimal overflow: ...` for decimals). Spark's own sum of bigints
wraps around, its sum of decimals gives NULL: both used to differ from the reference.
"""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import T0, Outputs, assert_same, assert_same_dead_letters, iso, run_both

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA t WITH k integer, g integer, amount decimal(10, 2), big decimal(38, 2),
  n bigint, i integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO money_time SELECT g, window_start() AS ws, sum(amount) AS total, avg(amount) AS mean,
  min(amount) AS lo, max(amount) AS hi, count(amount) AS c, sum(i) AS si
  FROM t WINDOW TIME SIZE 10 SECONDS GROUP BY g;
INSERT INTO wide_time SELECT g, window_end() AS we, sum(big) AS total, avg(big) AS mean,
  sum(n) AS sn, avg(n) AS an FROM t WINDOW TIME SIZE 10 SECONDS GROUP BY g;
INSERT INTO decimal_tuple SELECT g, sum(amount) AS total, avg(amount) AS mean, min(amount) AS lo,
  sum(big) AS sb, avg(big) AS ab FROM t WINDOW TUPLE SIZE 3 ADVANCE 2 GROUP BY g;
INSERT INTO long_tuple SELECT g, sum(n) AS total, avg(n) AS mean, count(*) AS c
  FROM t WINDOW TUPLE SIZE 3 GROUP BY g HAVING sum(n) > 0;
INSERT INTO batch SELECT g, sum(amount) AS total, avg(amount) AS mean, sum(n) AS sn
  FROM t WINDOW BATCH START i > 0 STOP i < 0 GROUP BY g;
"""
SINKS = ["money_time", "wide_time", "decimal_tuple", "long_tuple", "batch"]
HUGE = 2**62  # two of them overflow a bigint; with a third of the other sign, they come back


def events(n: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out = []
    t = T0
    for k in range(n):
        t += timedelta(seconds=rnd.randint(0, 4))
        big = Decimal(rnd.randint(-(10**6), 10**6)).scaleb(-2)
        if rnd.random() < 0.15:  # near the top of decimal(38, 2): three of them overflow its sum
            big = Decimal(rnd.choice([1, -1]) * rnd.randint(3 * 10**35, 10**36 - 1)).scaleb(-2) * 100
        out.append(
            {
                "k": k,
                "g": rnd.randint(1, 3),
                "amount": str(Decimal(rnd.randint(-5000, 20000)).scaleb(-2)),
                "big": format(big, "f"),
                "n": rnd.choice([HUGE, HUGE, -HUGE, 2**63 - 1, -(2**63), rnd.randint(-1000, 1000)]),
                "i": rnd.choice([1, -1, 0, 0, 5]),
                "ts": iso(t),
            }
        )
    return out


def run(spark: Any, tmp: Path, max_files: int | None) -> tuple[Outputs, Outputs]:
    rows = events(600, seed=4)
    files = [rows[:150], rows[150:300], rows[300:450], rows[450:]]
    return run_both(spark, tmp, SCRIPT, {"t": files}, SINKS, max_files=max_files)


@pytest.fixture(scope="module", params=[None, 1], ids=["one-batch", "file-per-batch"])
def both(request: Any, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    return run(spark, tmp_path_factory.mktemp("aggregate-overflow"), request.param)


@pytest.mark.parametrize("sink", SINKS)
def test_same_windows(both: tuple[Outputs, Outputs], sink: str) -> None:
    assert_same(*both, sink, min_rows=5)


def test_overflowing_windows_are_dead_letters_on_both_engines(both: tuple[Outputs, Outputs]) -> None:
    ref, _ = both
    reasons = {r["reason"] for r in ref.dead}
    assert "integer overflow: sum(n) is out of range for bigint" in reasons, reasons
    assert "decimal overflow: sum(big) is out of range for decimal(38, 2)" in reasons, reasons
    assert "decimal overflow: avg(big) is out of range for decimal(38, 6)" in reasons, reasons
    assert_same_dead_letters(*both)


def test_an_overflow_no_real_window_reaches_stops_the_run_with_its_reason(spark: Any) -> None:
    """A sum of integers needs 2^32 of them to leave the bigint range: no dead-letter query is
    planned for it (operators.analysis.can_overflow), so on Spark it stops the run, never vanishes
    (docs/language.md, "Engines"). Its aggregated row, as a window would give it, on a batch frame."""
    from pyspark.errors import PySparkException
    from spark_helpers import compile_text

    from deployer.spark.handlers import spark_graph
    from deployer.spark.windows.aggregate_rows import AGG_ERR, finish_aggregate
    from operators import graph as g

    graph = compile_text(
        """
        CREATE STREAMSCHEMA s WITH g integer, i integer;
        INSERT INTO o SELECT g, sum(i) AS total FROM s WINDOW TUPLE SIZE 2 GROUP BY g;
        """
    )
    node = next(n for n in graph.nodes if isinstance(n, g.Aggregate))
    reason = "integer overflow: sum(i) is out of range for bigint"
    rows = spark.createDataFrame(
        [(1, 5, "a", None), (2, None, "b", reason)], f"_0 int, _1 bigint, __seq string, {AGG_ERR} string"
    )
    sg = spark_graph(graph, {})
    with pytest.raises(PySparkException, match="out of range for bigint"):
        finish_aggregate(sg, node, rows).collect()
    assert finish_aggregate(sg, node, rows.limit(1)).collect()[0][:2] == (1, 5)
    assert sg.dead_letters == []
