"""Spark vs the reference executor: Join over TIME windows (the band r.ts - Sl < l.ts < r.ts + Sr).

The Join's own output order is not compared (the reference emits a pair when the later of its two
events is processed; Spark when it meets it): pairs are compared as multisets.
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
    at,
    iso,
    run_both,
    split_by_time,
)

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA a WITH k bigint, key integer, v varchar(8), amount double, t timestamp
  TIMESTAMP BY t WATERMARK 10 SECONDS;
CREATE STREAMSCHEMA b WITH k bigint, key integer, w varchar(8), qty integer, t timestamp TIMESTAMP BY t;

INSERT INTO keyed SELECT a.k AS ka, b.k AS kb, a.t AS t, a.v, b.w, a.amount * b.qty AS total, b.t AS bt
  FROM a WINDOW TIME SIZE 1 MINUTE, b WINDOW TIME SIZE 30 SECONDS WHERE a.key = b.key;
INSERT INTO band SELECT a.k AS ka, b.k AS kb, b.qty - a.amount AS gap
  FROM a WINDOW TIME SIZE 20 SECONDS, b WINDOW TIME SIZE 10 SECONDS WHERE a.amount < b.qty AND b.w <> 'x';
INSERT INTO risky SELECT a.k AS ka, b.k AS kb, a.amount / b.qty AS ratio
  FROM a WINDOW TIME SIZE 1 MINUTE, b WINDOW TIME SIZE 1 MINUTE WHERE a.key = b.key AND 10 / b.key > 1;
INSERT INTO per_v SELECT v, count(*) AS pairs, sum(total) AS total, window_end() AS we
  FROM keyed WINDOW TIME SIZE 5 MINUTES GROUP BY v;
"""

STREAMS = ["keyed", "band", "risky", "per_v"]


def events(seed: int, count: int, side: str) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    t = T0
    out = []
    for i in range(count):
        t += timedelta(seconds=rnd.choice([0, 1, 4, 9, 15, 30]))
        row: dict[str, Any] = {"k": seed * 1000 + i, "key": rnd.choice([0, 1, 2, 3, None]), "t": iso(t)}
        if side == "a":
            row |= {"v": rnd.choice(["p", "q", None]), "amount": rnd.choice([0.5, 2.0, 7.25, None])}
        else:
            row |= {"w": rnd.choice(["x", "y"]), "qty": rnd.choice([0, 1, 3, 8, None])}
        out.append(row)
    return out


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    tmp: Path = tmp_path_factory.mktemp("join")
    cuts = [at(minutes=20)]
    # Both inputs end with an event an hour later that joins nothing: at the end of the input the
    # engines close TIME windows over a join differently (the reference up to the later of its
    # inputs' final times, Spark up to the earlier one less the join's bound), and this keeps the
    # comparison to the windows both close.
    end = {"k": 0, "key": 99, "t": at(hours=1)}
    inputs = {
        "a": split_by_time([*events(1, 150, "a"), {**end, "v": None, "amount": None}], "t", cuts),
        "b": split_by_time([*events(2, 150, "b"), {**end, "w": "z", "qty": None}], "t", cuts),
    }
    return run_both(spark, tmp, SCRIPT, inputs, STREAMS, max_files=1)


@pytest.mark.parametrize("stream", ["keyed", "band", "risky"])
def test_join(both: tuple[Outputs, Outputs], stream: str) -> None:
    assert_same(*both, stream, min_rows=20)


def test_join_pairs_respect_the_band(both: tuple[Outputs, Outputs]) -> None:
    ref, _ = both
    for r in ref["keyed"]:
        assert iso_minus(r["bt"], 60) < r["t"] < iso_minus(r["bt"], -30)


def iso_minus(ts: str, seconds: int) -> str:
    from datetime import datetime

    return iso(datetime.fromisoformat(ts.replace("Z", "+00:00")) - timedelta(seconds=seconds))


def test_time_window_over_a_join(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "per_v", min_rows=5, ordered=True)


def test_dead_letters(both: tuple[Outputs, Outputs]) -> None:
    ref, spk = both
    assert any(r["stage"] == "Join" for r in ref.dead)
    assert_same_dead_letters(ref, spk)
