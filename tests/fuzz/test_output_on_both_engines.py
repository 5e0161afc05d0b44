"""OUTPUT rate limiting on both engines: every form of ../shared/CPL.md §7 over the same input on the
reference executor and on Spark, whose results must be the same rows in the same order
(tests/fuzz/fuzz_harness.check_case), with the input cut into micro-batches so that buckets, groups'
counters and ticks cross them.

The input: a stream with a key `k` and a value `v`, events 100 to 800 ms apart with some at equal
times, out of order within its WATERMARK, in four files that Spark reads one per micro-batch. The
reference executor's own tests (tests/local/test_output_rate.py, test_output_snapshot.py) say what
each form must give; these say Spark gives the same, and that there is something to compare.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case
from keyed_events import T0, keyed_stream

from cpl.compiler import compile_script
from deployer.spark.output.placement import in_window_aggregation
from operators.output_node import OutputRate

pytestmark = [pytest.mark.spark]

STREAMS = (
    "CREATE STREAMSCHEMA s WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;\n"
    "CREATE STREAMSCHEMA c WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
)
UNTIMED = "CREATE STREAMSCHEMA u WITH k integer, v integer, ts timestamp;\n"  # no event time: arrival order


def _case(statements: dict[str, str], seed: int) -> Case:
    rng = random.Random(seed)
    # `u` only where a statement reads it
    u = any(" FROM u " in text for text in statements.values())
    return Case(
        script=STREAMS + (UNTIMED if u else "") + "".join(statements.values()),
        inputs={
            "s": keyed_stream(rng, 60, True),
            "c": keyed_stream(rng, 40, True),
            "u": keyed_stream(rng, 30, True),
        }
        if u
        else {"s": keyed_stream(rng, 60, True), "c": keyed_stream(rng, 40, True)},
        sinks=list(statements),
        ordered={s: [] for s in statements},
        max_files=1,
    )


def _check(case: Case, spark: Any, tmp_path: Any) -> Any:
    """Both engines agree on `case`; the reference's Result."""
    ref = check_case(case, spark, None, tmp_path)
    assert ref.error is None, ref.error
    empty = [s for s in case.sinks if not ref.streams.get(s)]
    assert not empty, f"nothing to compare: no rows in {empty}"
    return ref


BY_EVENTS = {
    "all_n": "INSERT INTO all_n SELECT k, v, ts FROM s OUTPUT ALL EVERY 4 EVENTS;\n",
    "first_n": "INSERT INTO first_n SELECT k, v, ts FROM s GROUP BY k OUTPUT FIRST EVERY 3 EVENTS;\n",
    "last_n": "INSERT INTO last_n SELECT v FROM s GROUP BY k OUTPUT LAST EVERY 5 EVENTS;\n",
    "merged": "INSERT INTO merged SELECT k, v, ts FROM s, c OUTPUT LAST EVERY 3 EVENTS;\n",
    "untimed": "INSERT INTO untimed SELECT k, v FROM u GROUP BY k OUTPUT LAST EVERY 4 EVENTS;\n",
    "untimed_first": "INSERT INTO untimed_first SELECT k, v, ts FROM u GROUP BY k OUTPUT FIRST EVERY 2 EVENTS;\n",
}
BY_TIME = {
    "all_t": "INSERT INTO all_t SELECT k, v FROM s OUTPUT EVERY 2 SECONDS;\n",
    "first_t": "INSERT INTO first_t SELECT k, v, ts FROM s GROUP BY k OUTPUT FIRST EVERY 1500 MILLISECONDS;\n",
    "last_t": "INSERT INTO last_t SELECT k, v, ts FROM s GROUP BY k OUTPUT LAST EVERY 3 SECONDS;\n",
}
AFTER_WINDOWS = {
    "time_last": (
        "INSERT INTO time_last SELECT k, sum(v) AS total FROM s WINDOW TIME SIZE 1 SECOND GROUP BY k "
        "OUTPUT LAST EVERY 2 SECONDS;\n"
    ),
    # ALL and LAST EVERY duration over a TIME window with a HAVING that can fail run in a second
    # window aggregation of Spark's own (deployer.spark.output.in_window): a sliding window's rows
    "time_all": (
        "INSERT INTO time_all SELECT k, count(*) AS n, window_end() AS e FROM s "
        "WINDOW TIME SIZE 2 SECONDS ADVANCE 1 SECOND GROUP BY k HAVING 100 / count(*) < 60 "
        "OUTPUT ALL EVERY 3 SECONDS;\n"
    ),
    "time_last_all": (
        "INSERT INTO time_last_all SELECT max(v) AS top, window_start() AS s0 FROM s "
        "WINDOW TIME SIZE 500 MILLISECONDS OUTPUT LAST EVERY 2 SECONDS;\n"
    ),
    "tuple_all": (
        "INSERT INTO tuple_all SELECT k, count(*) AS n FROM s WINDOW TUPLE SIZE 3 GROUP BY k "
        "OUTPUT ALL EVERY 2 SECONDS;\n"
    ),
    "snap_time": (
        "INSERT INTO snap_time SELECT k, sum(v) AS total FROM s WINDOW TIME SIZE 2 SECONDS ADVANCE 1 SECOND "
        "GROUP BY k OUTPUT SNAPSHOT EVERY 1 SECOND;\n"
    ),
    "snap_tuple": (
        "INSERT INTO snap_tuple SELECT k, max(v) AS top FROM s WINDOW TUPLE SIZE 2 GROUP BY k "
        "OUTPUT SNAPSHOT EVERY 3 SECONDS;\n"
    ),
}
# ALL and LAST EVERY duration over a TUPLE or BATCH window's rows, without HAVING, are held by the
# window's own processor (deployer.spark.windows.window_limit): per bucket of groups (a TUPLE window
# over numbers), per group (a TUPLE window over text, a BATCH window), without GROUP BY, sliding
IN_WINDOW_PROCESSOR = {
    "tuple_last": (
        "INSERT INTO tuple_last SELECT k, sum(v) AS total, count(*) AS n FROM s WINDOW TUPLE SIZE 2 GROUP BY k "
        "OUTPUT LAST EVERY 2 SECONDS;\n"
    ),
    "tuple_sliding": (
        "INSERT INTO tuple_sliding SELECT avg(v) AS mean FROM s WINDOW TUPLE SIZE 3 ADVANCE 1 "
        "OUTPUT LAST EVERY 1500 MILLISECONDS;\n"
    ),
    "tuple_text": (
        "INSERT INTO tuple_text SELECT k, max(CAST(v AS varchar)) AS top FROM s WINDOW TUPLE SIZE 2 GROUP BY k "
        "OUTPUT ALL EVERY 3 SECONDS;\n"
    ),
    "batch_last": (
        "INSERT INTO batch_last SELECT k, count(*) AS n, min(v) AS low FROM s WINDOW BATCH START v % 3 = 0 "
        "STOP v % 4 = 0 GROUP BY k OUTPUT LAST EVERY 2 SECONDS;\n"
    ),
    "batch_all": (
        "INSERT INTO batch_all SELECT sum(v) AS total FROM c WINDOW BATCH START v > 4 STOP v < 3 "
        "OUTPUT ALL EVERY 1 SECOND;\n"
    ),
    # a timestamp key, held and given back; sums that overflow (v of 5 and more, twice) are
    # dead-lettered at once, never held
    "tuple_by_time": (
        "INSERT INTO tuple_by_time SELECT ts, count(*) AS n, sum(CAST(v AS bigint) * 1000000000000000000) AS big "
        "FROM s WINDOW TUPLE SIZE 1 GROUP BY ts OUTPUT LAST EVERY 2 SECONDS;\n"
    ),
    "tuple_overflow": (
        "INSERT INTO tuple_overflow SELECT k, sum(CAST(v AS bigint) * 1000000000000000000) AS big FROM s "
        "WINDOW TUPLE SIZE 2 GROUP BY k OUTPUT ALL EVERY 2 SECONDS;\n"
    ),
}
# ALL and LAST EVERY duration over a TIME window's rows, without a HAVING that can fail or
# aggregates that can overflow, are held by the window's own aggregation, keyed by the bucket
# (deployer.spark.windows.time_window_limit): sliding windows several to a bucket, a period that is
# not a multiple of the windows' ADVANCE, a period shorter than it, a value that is NULL in the
# latest window, no GROUP BY, a stream without WATERMARK, a HAVING that drops the latest window or
# the first, over aggregates and the window's bounds
IN_WINDOW_AGGREGATION = {
    "agg_all_sliding": (
        "INSERT INTO agg_all_sliding SELECT k, count(*) AS n, sum(v) AS total, window_end() AS e FROM s "
        "WINDOW TIME SIZE 2 SECONDS ADVANCE 1 SECOND GROUP BY k OUTPUT ALL EVERY 3 SECONDS;\n"
    ),
    "agg_last_odd": (
        "INSERT INTO agg_last_odd SELECT k, avg(v) AS mean, min(v) AS low, window_start() AS s0, "
        "sum(CASE WHEN v > 6 THEN v END) AS big FROM s WINDOW TIME SIZE 700 MILLISECONDS GROUP BY k "
        "OUTPUT LAST EVERY 1500 MILLISECONDS;\n"
    ),
    "agg_last_short": (
        "INSERT INTO agg_last_short SELECT k, count(*) AS n, window_end() AS e FROM s "
        "WINDOW TIME SIZE 2 SECONDS GROUP BY k OUTPUT LAST EVERY 1 SECOND;\n"
    ),
    "agg_all_nogroup": (
        "INSERT INTO agg_all_nogroup SELECT sum(v) AS total, max(k) AS top, window_end() AS e FROM c "
        "WINDOW TIME SIZE 1500 MILLISECONDS ADVANCE 500 MILLISECONDS OUTPUT ALL EVERY 1 SECOND;\n"
    ),
    "agg_last_having": (
        "INSERT INTO agg_last_having SELECT k, count(*) AS n, sum(v) AS total, window_end() AS e FROM s "
        "WINDOW TIME SIZE 1 SECOND GROUP BY k HAVING sum(v) > 6 OUTPUT LAST EVERY 3 SECONDS;\n"
    ),
    "agg_all_having": (
        "INSERT INTO agg_all_having SELECT k, max(v) AS top, window_start() AS s0 FROM s "
        "WINDOW TIME SIZE 2 SECONDS ADVANCE 1 SECOND GROUP BY k HAVING count(*) > 1 OR max(v) = 9 "
        "OUTPUT ALL EVERY 2 SECONDS;\n"
    ),
    "agg_last_having_bounds": (
        "INSERT INTO agg_last_having_bounds SELECT count(*) AS n, window_end() AS e FROM c "
        "WINDOW TIME SIZE 500 MILLISECONDS HAVING count(*) < 3 AND second(window_end()) <> 3 "
        "OUTPUT LAST EVERY 2 SECONDS;\n"
    ),
    "agg_last_sliding": (
        "INSERT INTO agg_last_sliding SELECT k, max(v) AS top, count(*) AS n FROM s "
        "WINDOW TIME SIZE 3 SECONDS ADVANCE 1 SECOND GROUP BY k OUTPUT LAST EVERY 4 SECONDS;\n"
    ),
}
AFTER_PATTERNS = {
    "pattern_first": (
        "INSERT INTO pattern_first SELECT e1.v AS v1, e2.v AS v2, match_time() AS at FROM PATTERN "
        "EVERY e1=s -> e2=s[k = e1.k AND v > e1.v] WITHIN 3 SECONDS GROUP BY e1.k OUTPUT FIRST EVERY 2 EVENTS;\n"
    ),
    "pattern_last_t": (
        "INSERT INTO pattern_last_t SELECT e1.k AS k, e2.v AS v FROM PATTERN "
        "EVERY e1=s -> e2=s[k = e1.k] WITHIN 2 SECONDS OUTPUT LAST EVERY 2 SECONDS;\n"
    ),
}


@pytest.mark.parametrize("seed", [1, 2])
def test_limits_by_count(spark: Any, tmp_path: Any, seed: int) -> None:
    _check(_case(BY_EVENTS, seed), spark, tmp_path)


@pytest.mark.parametrize("seed", [3, 4])
def test_limits_by_time(spark: Any, tmp_path: Any, seed: int) -> None:
    _check(_case(BY_TIME, seed), spark, tmp_path)


def test_limits_after_windows(spark: Any, tmp_path: Any) -> None:
    _check(_case(AFTER_WINDOWS, 5), spark, tmp_path)


@pytest.mark.parametrize("seed", [7, 8])
def test_limits_held_by_the_windows_processor(spark: Any, tmp_path: Any, seed: int) -> None:
    ref = _check(_case(IN_WINDOW_PROCESSOR, seed), spark, tmp_path)
    # the overflowing sums were there to pass the limit by: dead letters, the same on both engines
    assert any("out of range" in str(d.get("reason")) for d in ref.dead), ref.dead


@pytest.mark.parametrize("seed", [9, 10])
def test_limits_held_by_the_time_windows_aggregation(spark: Any, tmp_path: Any, seed: int) -> None:
    case = _case(IN_WINDOW_AGGREGATION, seed)
    graph = compile_script(case.script).graph
    limits = [n for n in graph.nodes if isinstance(n, OutputRate)]
    assert len(limits) == len(IN_WINDOW_AGGREGATION)
    assert all(in_window_aggregation(graph, n) for n in limits)  # what is compared here
    _check(case, spark, tmp_path)


def test_limits_after_patterns(spark: Any, tmp_path: Any) -> None:
    _check(_case(AFTER_PATTERNS, 6), spark, tmp_path)


def test_values_cross_the_limiter_unchanged(spark: Any, tmp_path: Any) -> None:
    # the limiter's rows cross to Python as JSON text on Spark: every type, its extremes and NULLs
    script = (
        "CREATE STREAMSCHEMA w WITH k bigint, d double, n decimal(38, 10), b boolean, s varchar, "
        "at timestamp, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO kept SELECT k, d, n, b, s, at, ts FROM w GROUP BY b OUTPUT LAST EVERY 2 EVENTS;\n"
        "INSERT INTO firsts SELECT k, d, n, s, ts FROM w GROUP BY s OUTPUT FIRST EVERY 2 SECONDS;\n"
    )
    values = [
        (9223372036854775807, 1e308, "1234567890123456789012345678.0123456789", True, 'quote " and \\\\ é ✓'),
        (-9223372036854775808, -0.0, "-0.0000000001", False, ""),
        (None, None, None, None, None),
        (9007199254740993, 0.1 + 0.2, "0", True, "x"),
        (1, 5e-324, "99999999999999999999999999.9999999999", None, "x"),
        (2, 123456.789e-300, None, False, None),
    ]
    lines = []
    for i, (k, d, n, b, s) in enumerate(values * 3):
        at = (T0 + timedelta(microseconds=123457 * i)).isoformat().replace("+00:00", "Z")
        ts = (T0 + timedelta(milliseconds=700 * i)).isoformat().replace("+00:00", "Z")
        lines.append(json.dumps({"k": k, "d": d, "n": n, "b": b, "s": s, "at": at, "ts": ts}))
    case = Case(
        script=script,
        inputs={"w": [lines[:7], lines[7:]]},
        sinks=["kept", "firsts"],
        ordered={"kept": [], "firsts": []},
        max_files=1,
    )
    _check(case, spark, tmp_path)
