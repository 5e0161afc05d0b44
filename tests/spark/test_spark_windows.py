"""Spark vs the reference executor: Aggregate over TIME, TUPLE and BATCH windows.

One script holds every case and runs once per engine for the module. The input is split into
files at the same instants for both sources and Spark reads one file per source per micro-batch,
so window state has to carry over between batches (and the watermark has to advance with them).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    T0,
    Outputs,
    assert_same,
    assert_same_dead_letters,
    assert_same_order_per_group,
    at,
    iso,
    run_both,
    split_by_time,
)

pytestmark = pytest.mark.spark

SCHEMA = "k bigint, caller integer, dur integer, amount decimal(8, 2), tag varchar(8), ts timestamp"
SCRIPT = f"""
CREATE STREAMSCHEMA c WITH {SCHEMA} TIMESTAMP BY ts WATERMARK 30 SECONDS;
CREATE STREAMSCHEMA z WITH {SCHEMA} TIMESTAMP BY ts;
CREATE WINDOW tenmin AS TIME SIZE 10 MINUTES ADVANCE 10 MINUTES;

INSERT INTO tumbling SELECT caller, count(*) AS n, count(amount) AS priced, sum(dur) AS total,
    avg(amount) AS mean, avg(dur) AS mean_dur, min(ts) AS first, max(dur) AS longest, min(tag) AS tag,
    window_start() AS ws, window_end() AS we
  FROM c WINDOW tenmin GROUP BY caller;
INSERT INTO hopping SELECT caller, count(*) AS n, sum(amount) AS total, max(ts) AS last, window_end() AS we
  FROM c WINDOW TIME SIZE 15 MINUTES ADVANCE 5 MINUTES GROUP BY caller HAVING count(*) > 1;
INSERT INTO tumbling0 SELECT caller, tag, sum(dur) AS total, window_end() AS we FROM z WINDOW tenmin
  GROUP BY caller, tag;
INSERT INTO everyone SELECT count(*) AS n, sum(dur) AS total, window_start() AS ws
  FROM z WINDOW TIME SIZE 7 MINUTES ADVANCE 7 MINUTES;
INSERT INTO bad_time SELECT 100 / dur > 1 AS short, count(*) AS n FROM z WINDOW tenmin GROUP BY 100 / dur > 1
  HAVING 1000 / (max(dur) - min(dur)) > 0;

INSERT INTO tuple_lt SELECT caller, count(*) AS n, sum(1000 / dur) AS inverse, min(ts) AS first, max(ts) AS last
  FROM c WINDOW TUPLE SIZE 4 ADVANCE 2 GROUP BY caller;
INSERT INTO tuple_eq SELECT caller, sum(amount) AS total, avg(amount) AS mean, max(tag) AS tag,
    max(dur) / min(dur) AS ratio
  FROM c WINDOW TUPLE SIZE 3 ADVANCE 3 GROUP BY caller;
INSERT INTO tuple_gt SELECT count(*) AS n, sum(dur) AS total, avg(dur) AS mean, count(caller) AS known,
    min(amount) AS low
  FROM z WINDOW TUPLE SIZE 2 ADVANCE 5;
INSERT INTO both_streams SELECT * FROM c, z;
INSERT INTO tuple_union SELECT caller, sum(dur) AS total, min(k) AS first_k, max(k) AS last_k
  FROM both_streams WINDOW TUPLE SIZE 3 GROUP BY caller HAVING sum(dur) > 20;

INSERT INTO batches SELECT caller, count(*) AS n, sum(dur) AS total, min(ts) AS opened, max(ts) AS closed,
    max(k) AS last_k
  FROM c WINDOW BATCH START dur > 600 STOP dur > 600 OR dur < 10 GROUP BY caller;
"""

STREAMS = [
    "tumbling",
    "hopping",
    "tumbling0",
    "everyone",
    "bad_time",
    "tuple_lt",
    "tuple_eq",
    "tuple_gt",
    "tuple_union",
    "batches",
]


def calls(seed: int, count: int) -> list[dict[str, Any]]:
    """Calls in event-time order over a few hours, with equal times, NULL callers and zero durations."""
    rnd = random.Random(seed)
    t = T0 + timedelta(seconds=rnd.randint(0, 59))
    out = []
    for i in range(count):
        t += timedelta(seconds=rnd.choice([0, 3, 20, 45, 60, 90, 120]))
        out.append(
            {
                "k": seed * 10000 + i,
                "caller": rnd.choice([1, 2, 3, 4, None]),
                "dur": rnd.choice([0, 5, 9, 10, 30, 120, 601, 700, 1500]),
                "amount": None if rnd.random() < 0.1 else f"{rnd.randint(0, 99999) / 100:.2f}",
                "tag": rnd.choice(["a", "b", "mark", None]),
                "ts": iso(t),
            }
        )
    return out


# Every source's files end at the same instants: no source's next batch starts before another's
# previous one ended (see the module docstring).
CUTS = [at(hours=1.5), at(hours=3)]


def ending_at(rows: list[dict[str, Any]], delay_s: int) -> list[dict[str, Any]]:
    """The rows and one more whose time makes the final watermark (max event time - delay) fall
    exactly on a 10-minute window boundary: that window must fire, the next one must not."""
    last = datetime.fromisoformat(rows[-1]["ts"].replace("Z", "+00:00"))
    boundary = last.replace(minute=last.minute - last.minute % 10, second=0) + timedelta(minutes=10)
    end = {**rows[-1], "k": rows[-1]["k"] + 1, "ts": iso(boundary + timedelta(seconds=delay_s))}
    return [*rows, end]


C = ending_at(calls(1, 260), 30)  # WATERMARK 30 SECONDS
Z = ending_at(calls(2, 260), 0)  # no WATERMARK: 0


def fired_ends(rows: list[dict[str, Any]], delay_s: int) -> set[str]:
    """The reference's rule: a 10-minute window [s, e) fires at the end iff max time - delay >= e."""
    times = [datetime.fromisoformat(r["ts"].replace("Z", "+00:00")) for r in rows]
    final = max(times) - timedelta(seconds=delay_s)
    ends = {t.replace(minute=t.minute - t.minute % 10, second=0) + timedelta(minutes=10) for t in times}
    return {iso(e) for e in ends if e <= final}


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    tmp: Path = tmp_path_factory.mktemp("windows")
    inputs = {"c": split_by_time(C, "ts", CUTS), "z": split_by_time(Z, "ts", CUTS)}
    assert all(len(files) == 3 for files in inputs.values())
    return run_both(spark, tmp, SCRIPT, inputs, STREAMS)


@pytest.mark.parametrize(
    ("stream", "keys"),
    [("tumbling", ["caller"]), ("hopping", ["caller"]), ("tumbling0", ["caller", "tag"]), ("everyone", [])],
)
def test_time_windows(both: tuple[Outputs, Outputs], stream: str, keys: list[str]) -> None:
    assert_same(*both, stream, min_rows=10, ordered=True)
    assert_same_order_per_group(*both, stream, keys)


def test_time_window_end_of_input(both: tuple[Outputs, Outputs]) -> None:
    # A window fires at the end of the input iff the final watermark (max event time - WATERMARK)
    # reached its end, the last one exactly so.
    assert max(fired_ends(Z, 0)) == Z[-1]["ts"]
    for engine in both:
        assert {r["we"] for r in engine["tumbling"]} == fired_ends(C, 30)
        assert {r["we"] for r in engine["tumbling0"]} == fired_ends(Z, 0)


@pytest.mark.parametrize(
    ("stream", "keys"),
    [("tuple_lt", ["caller"]), ("tuple_eq", ["caller"]), ("tuple_gt", []), ("tuple_union", ["caller"])],
)
def test_tuple_windows(both: tuple[Outputs, Outputs], stream: str, keys: list[str]) -> None:
    assert_same(*both, stream, min_rows=10, ordered=True)
    assert_same_order_per_group(*both, stream, keys)


def test_tuple_windows_keep_null_groups(both: tuple[Outputs, Outputs]) -> None:
    ref, _ = both
    assert any(r["caller"] is None for r in ref["tuple_eq"])


def test_batch_windows(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "batches", min_rows=5, ordered=True)
    assert_same_order_per_group(*both, "batches", ["caller"])


def test_rows_that_survive_errors(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "bad_time", min_rows=3, ordered=True)


def test_dead_letters(both: tuple[Outputs, Outputs]) -> None:
    ref, spk = both
    # input events (keys, arguments) and aggregated rows (HAVING, projections) of TIME and TUPLE
    failed = {r["node"] for r in ref.dead if r["stage"] == "Aggregate"}
    assert len(failed) >= 3, failed
    assert_same_dead_letters(ref, spk)
