"""Spark vs the reference executor: Map, Filter, MultiFilter and Union, NULLs and dead letters.

One script holds every case, so both engines run once for the whole module (a Spark run costs
seconds); each test then compares one output stream.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    T0,
    Outputs,
    assert_same,
    assert_same_dead_letters,
    chunks,
    iso,
    run_both,
)

pytestmark = pytest.mark.spark

SCRIPT = r"""
CREATE STREAMSCHEMA e WITH k bigint, id integer, name varchar(20), price decimal(10, 2), qty bigint, ok boolean,
  ts timestamp, score double, code varchar(24), n integer
  TIMESTAMP BY ts WATERMARK 2 SECONDS;
CREATE STREAMSCHEMA e2 WITH k bigint, id integer, name varchar(20), price decimal(10, 2), qty bigint, ok boolean,
  ts timestamp, score double, code varchar(24), n integer
  TIMESTAMP BY ts WATERMARK 2 SECONDS;

INSERT INTO cases SELECT k, id,
    CASE WHEN qty > 100 THEN 'bulk' WHEN qty > 10 THEN 'medium' ELSE 'small' END AS size_class,
    CASE qty WHEN 1 THEN 'one' WHEN 2 THEN 'two' END AS one_two,
    CASE WHEN ok THEN price END AS price_if_ok,
    CASE WHEN n IS NULL THEN 0 WHEN n > 0 THEN 1 ELSE -1 END AS sign_n,
    NOT ok AS not_ok, name IS NULL AS anonymous, name IS NOT NULL AS named,
    id IN (1, 2, 3) AS small_id, id NOT IN (3, 5, 7) AS not_odd, n IN (1, NULL) AS n_in_null,
    qty BETWEEN 1 AND 100 AS mid_qty, qty NOT BETWEEN n AND 50 AS outside,
    ok AND n > 0 AS both, ok OR n > 0 AS either
  FROM e;

INSERT INTO arith SELECT k, id,
    CAST(price AS double) * qty AS amount, price * 2 AS double_price, price + price AS twice,
    price - 1 AS less, -price AS neg_price, qty / 4 AS quarter, qty % 4 AS remainder,
    -qty % 4 AS neg_remainder, mod(qty, 3) AS m3, n * 1000 + id AS mixed, score * 2 AS double_score,
    score / 4 AS quarter_score, abs(-qty) AS absolute, abs(score) AS abs_score,
    round(score, 2) AS r2, round(score) AS r0, floor(score) AS fl, ceil(score) AS ce,
    sqrt(abs(score)) AS root, power(qty, 2) AS sq, greatest(id, 5, n) AS gr, least(id, 5, n) AS le,
    coalesce(n, id, 0) AS co, coalesce(score, 0.5) AS co_score, nullif(id, 3) AS ni
  FROM e;

INSERT INTO texts SELECT k, id,
    upper(substring(name, 1, 3)) || '-' || lower(trim(name)) AS code3, substring(name, 2) AS tail,
    substr(name, 0, 3) AS head, length(name) AS len, concat(name, '/', id, '/', ok) AS joined,
    name || '!' AS shout, name LIKE 'A%' AS a_name, name NOT LIKE '%z_' AS not_z,
    name LIKE '%\_%' AS underscore, name LIKE 'b%c' AS b_c,
    CAST(id AS varchar) AS id_text, CAST(price AS varchar) AS price_text, CAST(ok AS varchar) AS ok_text,
    CAST(ts AS varchar) AS ts_text, CAST(name AS varchar(3)) AS name3, id || ':' || price AS tagged,
    CAST(score AS varchar) AS score_text, score * 1e7 || '' AS big_score_text
  FROM e;

INSERT INTO casts SELECT k, id,
    CAST(score AS integer) AS score_int, CAST(price AS integer) AS price_int, CAST(qty AS decimal(12, 3)) AS qty_dec,
    CAST(score AS decimal(12, 2)) AS score_dec, CAST(qty AS double) AS qty_double, CAST(ok AS integer) AS ok_int,
    CAST(id AS bigint) AS id_big, CAST(n AS double) / 3 AS third
  FROM e;

INSERT INTO times SELECT k, id, year(ts) AS y, month(ts) AS mo, day(ts) AS d, hour(ts) AS h, minute(ts) AS mi,
    second(ts) AS s, epoch_millis(ts) AS ms, from_epoch_millis(epoch_millis(ts) + 1500) AS later, ts,
    ts >= TIMESTAMP '2026-01-01 00:30:00' AS late_half
  FROM e;

INSERT INTO filtered SELECT k, id, name, ts FROM e
  WHERE (name LIKE 'A%' OR name NOT LIKE '%z_') AND qty BETWEEN 1 AND 1000 AND id NOT IN (3, 5, 7)
    AND ts >= '2026-01-01' AND score IS NOT NULL AND ok;

INSERT INTO lo SELECT * FROM e2 WHERE qty < 50;
INSERT INTO hi SELECT * FROM e2 WHERE qty >= 50 OR qty IS NULL;
INSERT INTO odd SELECT k, id, qty, ts FROM e2 WHERE id % 2 = 1;

INSERT INTO merged SELECT * FROM e, e2;
INSERT INTO merged_where SELECT k, n, ts FROM merged WHERE 100 / n > 1 OR name LIKE 'A%';

INSERT INTO risky SELECT k, id, qty / n AS ratio, CAST(code AS integer) AS code_int FROM e;
INSERT INTO overflow SELECT k, n * 100000000 AS big, qty * 4611686018427387904 AS huge FROM e;
INSERT INTO risky_where SELECT k, id FROM e WHERE 100 / n > 1;
INSERT INTO as_double SELECT k, CAST(code AS double) AS code_double FROM e;
INSERT INTO as_bool SELECT k, CAST(code AS boolean) AS code_bool FROM e;
INSERT INTO as_dec SELECT k, CAST(code AS decimal(6, 2)) AS code_dec FROM e;
INSERT INTO as_ts SELECT k, CAST(code AS timestamp) AS code_ts FROM e;
INSERT INTO narrowed SELECT k, CAST(qty * 1000000 AS integer) AS big, CAST(price AS decimal(4, 1)) AS small,
    CAST(score * 1e9 AS integer) AS huge FROM e;
INSERT INTO guarded SELECT k, id,
    CASE WHEN n = 0 THEN NULL ELSE qty / n END AS safe_ratio,
    n <> 0 AND qty / n > 1 AS short_and, n = 0 OR qty / n > 1 AS short_or, NULL / n AS null_left
  FROM e;
"""

STREAMS = [
    "cases",
    "arith",
    "texts",
    "casts",
    "times",
    "filtered",
    "lo",
    "hi",
    "odd",
    "merged",
    "merged_where",
    "risky",
    "risky_where",
    "overflow",
    "as_double",
    "as_bool",
    "as_dec",
    "as_ts",
    "narrowed",
    "guarded",
]

NAMES = ["Alice", "bob", " Carl ", "az_", "b_c", "Bzzz", "Aza", "", "bxc", "ünï", "Anna-Lena", "x_y_z"]
CODES = ["12", " 7 ", "-3", "abc", "1.5", "true", "no", "2026-01-02T03:04:05Z", "1e2", "", "99999", "t"]


def events(seed: int, count: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)

    def maybe(v: Any, p: float = 0.12) -> Any:
        return None if rnd.random() < p else v

    out = []
    t = T0
    for i in range(count):
        t += timedelta(seconds=rnd.choice([0, 1, 1, 2, 5, 17]), milliseconds=rnd.choice([0, 0, 250, 500]))
        out.append(
            {
                "k": seed * 100000 + i,
                "id": maybe(rnd.randint(-2, 12), 0.05),
                "name": maybe(rnd.choice(NAMES)),
                "price": maybe(f"{rnd.randint(-500, 50000) / 100:.2f}"),
                "qty": maybe(rnd.choice([0, 1, 2, 3, 7, 10, 11, 50, 99, 100, 101, 1000, 5000])),
                "ok": maybe(rnd.random() < 0.6),
                "ts": iso(t),
                "score": maybe(
                    rnd.choice([0.0, -0.5, 2.5, 3.14159, -7.25, 1234.5678, 0.125, -2.675, 99.995])
                ),
                "code": maybe(rnd.choice(CODES)),
                "n": maybe(rnd.choice([0, 1, -1, 2, 5, 20, 60, 100])),
            }
        )
    return out


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    tmp: Path = tmp_path_factory.mktemp("stateless")
    inputs = {
        "e": chunks(events(1, 240), 3),
        "e2": chunks(events(2, 120), 2),
    }
    # a bad record of each kind: malformed JSON, a field that does not convert, a missing field
    inputs["e"][1] = [*inputs["e"][1], "{not json", {"id": "x1"}, {"id": 1}, "", "[1, 2]"]
    # an event without event time: the Source dead-letters it
    inputs["e2"][0] = [*inputs["e2"][0], {**inputs["e2"][0][-1], "k": 99, "ts": None}]
    return run_both(spark, tmp, SCRIPT, inputs, STREAMS)


@pytest.mark.parametrize("stream", ["cases", "arith", "casts", "times", "texts"])
def test_map(both: tuple[Outputs, Outputs], stream: str) -> None:
    assert_same(*both, stream, min_rows=200, ordered=True)


@pytest.mark.parametrize("stream", ["filtered", "merged_where"])
def test_filter(both: tuple[Outputs, Outputs], stream: str) -> None:
    assert_same(*both, stream, min_rows=10, ordered=True)


@pytest.mark.parametrize("stream", ["lo", "hi", "odd"])
def test_multifilter(both: tuple[Outputs, Outputs], stream: str) -> None:
    assert_same(*both, stream, min_rows=10, ordered=True)


def test_union(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "merged", min_rows=360, ordered=True)


@pytest.mark.parametrize(
    "stream",
    ["risky", "risky_where", "overflow", "as_double", "as_bool", "as_dec", "as_ts", "narrowed", "guarded"],
)
def test_rows_that_survive_errors(both: tuple[Outputs, Outputs], stream: str) -> None:
    assert_same(*both, stream, min_rows=5, ordered=True)


def test_dead_letters(both: tuple[Outputs, Outputs]) -> None:
    ref, spk = both
    stages = {r["stage"] for r in ref.dead}
    assert {"input", "Source", "Map", "Filter", "MultiFilter"} <= stages, stages
    assert_same_dead_letters(ref, spk)


def test_filter_counts_can_be_turned_off(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Filter observes the events it drops (the run's `filtered` count) unless CEP_COUNT_FILTERED=0,
    which leaves the plan without the observation (it ends the stage's generated code)."""
    from pyspark.sql import functions as F

    from cpl.compiler import compile_script
    from deployer.spark.handlers import spark_graph
    from deployer.spark.translate.columns import col_name
    from deployer.spark.translate.graph import SEQ

    graph = compile_script(
        "CREATE STREAMSCHEMA s WITH a integer;\nINSERT INTO big SELECT a FROM s WHERE a > 1;"
    ).graph
    src = spark.readStream.format("rate").load()
    frame = src.select(
        F.col("value").cast("int").alias(col_name(0)), F.col("value").cast("string").alias(SEQ)
    )

    def plan() -> str:
        sg = spark_graph(graph, {"s": frame})
        return str(sg.port(graph.streams["big"])._jdf.queryExecution().logical().toString())

    assert "CollectMetrics" in plan()
    monkeypatch.setenv("CEP_COUNT_FILTERED", "0")
    assert "CollectMetrics" not in plan()
