"""A join's pairs come out of time order on Spark, and what depends on their order reads them in
time order (found by review, then probed with the differential harness).

Spark makes a pair when the later of its two events arrives, and a pair's time is its left
event's: below, l@10 comes in the first micro-batch, l@11 and r@11 in the second (the pairs
(10, 11) and (11, 11)), r@12 in the third (the pairs (10, 12) and (11, 12)), so Spark's pairs came
(10, 11), (11, 11), (10, 12), (11, 12), where the reference executor's come in time order: (10, 11),
(10, 12), (11, 11), (11, 12). A TUPLE window of two pairs summed other pairs, and `OUTPUT FIRST EVERY
2 EVENTS` on the join let out other pairs. Now the window reads them through an OutputRate `IN TIME
ORDER` and the limit waits for the watermark itself (cpl.plan_order), on both engines; the pair at
40 s, which the final watermark has not passed, is read by neither (docs/language.md, "Rows out of
time order").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

JOIN = (
    "CREATE STREAMSCHEMA s WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA r WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "INSERT INTO j SELECT l.k AS k, l.v AS v, q.v AS w, l.ts AS ts FROM s AS l WINDOW TIME SIZE 10 SECONDS, "
    "r AS q WINDOW TIME SIZE 10 SECONDS WHERE l.k = q.k;\n"
)


def _event(v: int) -> str:
    return f'{{"k": 1, "v": {v}, "ts": "2026-01-01T00:00:{v:02d}Z"}}'


CASE = case_from_dict(
    {
        "script": JOIN,
        "inputs": {
            "s": [[_event(10)], [_event(11)], [], [_event(40)]],
            "r": [[], [_event(11)], [_event(12)], [_event(40)]],
        },
        "sinks": ["j"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 1,  # a file per micro-batch
        "ordered": {},
        "mtimes": "equal",
        "partitions": 1,
        "trigger_clock": None,
    }
)


def test_a_tuple_window_over_pairs_reads_them_in_time_order(spark: Any, tmp_path: Any) -> None:
    reader = "INSERT INTO w SELECT count(*) AS n, sum(w) AS s, min(v) AS a FROM j WINDOW TUPLE SIZE 2;\n"
    case = replace(CASE, script=JOIN + reader, sinks=["w"], ordered={"w": []})
    result = check_case(case, spark, None, tmp_path)
    assert result.streams["w"] == [{"n": 2, "s": 23, "a": 10}, {"n": 2, "s": 23, "a": 11}]


def test_a_limit_by_count_on_a_join_takes_its_pairs_in_time_order(spark: Any, tmp_path: Any) -> None:
    script = JOIN.replace("l.k = q.k;", "l.k = q.k OUTPUT FIRST EVERY 2 EVENTS;")
    case = replace(CASE, script=script, ordered={"j": []})
    result = check_case(case, spark, None, tmp_path)
    assert [(row["v"], row["w"]) for row in result.streams["j"]] == [(10, 11), (11, 11)]


def test_a_pattern_over_pairs_takes_them_in_time_order(spark: Any, tmp_path: Any) -> None:
    """Spark's pattern took the pairs as they came: a = (11, 11) came before b = (10, 12), and made a
    second match the reference does not make (b is earlier than that a). Its events now wait for
    the watermark, as the reference's merge holds them (`Pattern.in_time_order`)."""
    reader = (
        "INSERT INTO p SELECT a.v AS av, b.v AS bv, b.w AS bw "
        "FROM PATTERN EVERY a=j[w = 11] -> b=j[v = 10 AND w = 12];\n"
    )
    case = replace(CASE, script=JOIN + reader, sinks=["p"], ordered={"p": []})
    result = check_case(case, spark, None, tmp_path)
    assert result.streams["p"] == [{"av": 10, "bv": 10, "bw": 12}]


def test_at_the_end_a_pattern_over_pairs_takes_only_those_the_watermark_passed(
    spark: Any, tmp_path: Any
) -> None:
    """The pair at 40 s: the join's final watermark is 40 s less the larger window (10 s), so
    neither engine takes it; the reference took it at the end before (its merge released every
    waiting event), which Spark's operator after a join, with no end of input, never does."""
    reader = "INSERT INTO p SELECT a.v AS av, b.v AS bv FROM PATTERN EVERY a=j[w > 10] -> b=j[w = 40];\n"
    case = replace(CASE, script=JOIN + reader, sinks=["p"], ordered={"p": []})
    result = check_case(case, spark, None, tmp_path)
    assert result.streams["p"] == []
