"""Patterns, sequences and absence on both engines: every form of ../shared/CPL.md §6 over the same
input on the reference executor and on Spark, whose results must be the same rows, in the same order
per partition key, with the same dead letters (tests/fuzz/fuzz_harness.check_case).

The input is three streams of one shape, a key `k` and a value `v`, made by a seeded generator: events
100 to 800 ms apart with some at equal times, `b` out of order within its WATERMARK, each stream in
four files that Spark reads one per micro-batch, so that partial matches, WITHIN and absence
deadlines cross micro-batches. Each test runs one group of statements; the reference executor's own
tests (tests/local/test_patterns.py and its siblings) say what each form must give, these say Spark
gives the same, and that there is something to compare (each sink has rows).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case
from keyed_events import keyed_stream

pytestmark = [pytest.mark.spark]

STREAMS = (
    "CREATE STREAMSCHEMA a WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA b WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;\n"
    "CREATE STREAMSCHEMA c WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
)


def _inputs(seed: int, n: int = 40) -> dict[str, list[list[str]]]:
    rng = random.Random(seed)
    return {s: keyed_stream(rng, n, s == "b") for s in ("a", "b", "c")}


def _case(statements: dict[str, str], partitioned: set[str], seed: int, max_files: int | None = 1) -> Case:
    """One script of `statements` (sink name -> INSERT INTO it), ordered per key `k` for the
    partitioned ones, as a whole for the others."""
    return Case(
        script=STREAMS + "".join(statements.values()),
        inputs=_inputs(seed),
        sinks=list(statements),
        ordered={s: (["k"] if s in partitioned else []) for s in statements},
        max_files=max_files,
    )


def _check(case: Case, spark: Any, tmp_path: Any) -> None:
    ref = check_case(case, spark, None, tmp_path)
    assert ref.error is None, ref.error
    empty = [s for s in case.sinks if not ref.streams.get(s)]
    assert not empty, f"nothing to compare: no rows in {empty}"


FOLLOWED_BY = {
    "repeated": "INSERT INTO repeated SELECT e1.k AS k, e1.v AS v1, e2.v AS v2, match_time() AS t "
    "FROM PATTERN EVERY e1=a[v > 5] -> e2=b[k = e1.k AND v > e1.v] WITHIN 3 SECONDS;\n",
    "once": "INSERT INTO once SELECT e1.v AS v1, e2.v AS v2, e3.k AS k3, match_time() AS t "
    "FROM PATTERN e1=a[v > 7] -> e2=b[v < e1.v] -> e3=c;\n",
    "keyed": "INSERT INTO keyed SELECT e1.k AS k, e1.v AS v1, e2.v AS v2, e3.v AS v3, e3.ts AS t3 "
    "FROM PATTERN EVERY e1=a -> e2=b[v >= e1.v] -> e3=c[v <> e2.v] WITHIN 4 SECONDS PARTITION BY k;\n",
    "regroup": "INSERT INTO regroup SELECT e1.k AS k, e1.v AS v1, e2.v AS v2 "
    "FROM PATTERN EVERY (e1=a[v > 6] -> e2=c[k = e1.k]) WHERE e2.v > 2;\n",
}

LOGICAL = {
    "both": "INSERT INTO both SELECT e1.v AS v1, e2.v AS v2, e3.v AS v3, match_time() AS t "
    "FROM PATTERN EVERY (e1=a[v > 4] AND e2=b[v > 4]) -> e3=c[k = e2.k] WITHIN 5 SECONDS;\n",
    "either": "INSERT INTO either SELECT e1.v AS v1, e2.v AS v2, e1.k AS k1, e2.k AS k2 "
    "FROM PATTERN EVERY e1=a[v = 1] OR e2=b[v = 1];\n",
    "overlap": "INSERT INTO overlap SELECT e1.v AS v1, e2.v AS v2, e1.ts AS t1, e2.ts AS t2 "
    "FROM PATTERN EVERY (e1=a[v > 3] AND e2=a[v < 6]) PARTITION BY k;\n",
    "orthen": "INSERT INTO orthen SELECT e1.k AS k, e1.v AS v1, e2.v AS v2, e3.v AS v3 "
    "FROM PATTERN EVERY e1=a[v > 7] -> (e2=b[v > 7] OR e3=c[v > 7]) PARTITION BY k;\n",
}

COUNTS = {
    "collected": "INSERT INTO collected SELECT e1.k AS k, e2[0].v AS first, e2[1].v AS second, "
    "e2[last].v AS last, e2[last - 1].v AS before_last, count(e2.v) AS n, sum(e2.v) AS total, "
    "avg(e2.v) AS mean, min(e2.v) AS low, max(e2.v) AS high, e3.v AS v3 "
    "FROM PATTERN EVERY e1=a[v < 3] -> e2=b[v > 2]<2:4> -> e3=c[v > e2[last].v] WITHIN 5 SECONDS "
    "PARTITION BY k;\n",
    "exactly": "INSERT INTO exactly SELECT e1.v AS v1, e2[0].v AS f, e2[2].v AS l, count(e2.v) AS n "
    "FROM PATTERN EVERY e1=a[v > 6] -> e2=b[v < 5]<3> WITHIN 6 SECONDS;\n",
    "maybe": "INSERT INTO maybe SELECT e1.k AS k, e1.v AS v1, count(e2.v) AS n, e2[0].v AS f, e3.v AS v3 "
    "FROM PATTERN EVERY e1=a[v > 5] -> e2=b<0:2> -> e3=c[v > 5] PARTITION BY k;\n",
    "atleast": "INSERT INTO atleast SELECT e1.v AS v1, count(e2.v) AS n, max(e2.ts) AS upto "
    "FROM PATTERN EVERY e1=c[v = 0] -> e2=a[v > 2]<2:> -> e3=b[v = 0] WITHIN 4 SECONDS;\n",
    "atmost": "INSERT INTO atmost SELECT e1.k AS k, count(e2.v) AS n, e2[last].v AS l, e3.v AS v3 "
    "FROM PATTERN EVERY e1=b[v = 9] -> e2=a<:2> -> e3=c PARTITION BY k;\n",
}

SEQUENCES = {
    "peaks": "INSERT INTO peaks SELECT e1.v AS start, e2[last].v AS top, count(e2.v) AS n, e3.v AS fall "
    "FROM SEQUENCE EVERY e1=a, e2=a[v > coalesce(e2[last].v, e1.v)]+, e3=a[v < e2[last].v];\n",
    "next": "INSERT INTO next SELECT e1.k AS k, e1.v AS v1, e2.v AS v2 "
    "FROM SEQUENCE EVERY e1=a[v > 5], e2=b[k = e1.k];\n",
    "stars": "INSERT INTO stars SELECT e1.k AS k, e1.v AS v1, count(e2.v) AS n, e3.v AS v3 "
    "FROM SEQUENCE EVERY e1=a, e2=b*, e3=c PARTITION BY k;\n",
    "optional": "INSERT INTO optional SELECT e1.v AS v1, e2[0].v AS v2, e3.v AS v3 "
    "FROM SEQUENCE EVERY e1=a[v > 2], e2=c?, e3=b WITHIN 2 SECONDS;\n",
    "counted": "INSERT INTO counted SELECT e1.k AS k, e1.v AS v1, e2[0].v AS f, e2[last].v AS l "
    "FROM SEQUENCE EVERY e1=c, e2=a<2:3>, e3=b PARTITION BY k;\n",
}

ABSENCE = {
    "silent": "INSERT INTO silent SELECT e1.k AS k, e1.v AS v1, match_time() AS t "
    "FROM PATTERN EVERY e1=a[v > 5] -> NOT b[k = e1.k] FOR 1 SECOND;\n",
    "gap": "INSERT INTO gap SELECT e1.k AS k, e1.v AS v1, e3.v AS v3, match_time() AS t "
    "FROM PATTERN EVERY e1=a[v > 6] -> NOT c[k = e1.k] FOR 1 SECOND -> e3=b[k = e1.k];\n",
    "leading": "INSERT INTO leading SELECT e2.k AS k, e2.v AS v2, match_time() AS t "
    "FROM PATTERN EVERY NOT c[v > 4] FOR 1 SECOND -> e2=a PARTITION BY k;\n",
    "notand": "INSERT INTO notand SELECT e1.k AS k, e1.v AS v1, e3.v AS v3 "
    "FROM PATTERN EVERY e1=a[v > 6] -> NOT c[k = e1.k] AND e3=b[k = e1.k];\n",
    "notor": "INSERT INTO notor SELECT e1.k AS k, e1.v AS v1, e3.v AS v3, match_time() AS t "
    "FROM PATTERN EVERY e1=a[v > 7] -> (NOT b FOR 1 SECOND OR e3=c) PARTITION BY k;\n",
    "quiet": "INSERT INTO quiet SELECT match_time() AS t FROM PATTERN EVERY NOT a FOR 700 MILLISECONDS;\n",
    "seqgap": "INSERT INTO seqgap SELECT e1.v AS v1, match_time() AS t "
    "FROM SEQUENCE EVERY e1=c[v > 4], NOT a FOR 500 MILLISECONDS;\n",
}

DOWNSTREAM = {
    "matches": "INSERT INTO matches SELECT e1.k AS k, e2.v - e1.v AS rise, match_time() AS t "
    "FROM PATTERN EVERY e1=a -> e2=b[k = e1.k AND v > e1.v] WITHIN 2 SECONDS;\n",
    "perwindow": "INSERT INTO perwindow SELECT k, count(rise) AS n, sum(rise) AS total FROM matches "
    "WINDOW TIME SIZE 5 SECONDS GROUP BY k;\n",
    "expired": "INSERT INTO expired SELECT e1.k AS k, match_time() AS t "
    "FROM PATTERN EVERY e1=c[v > 6] -> NOT a[k = e1.k] FOR 1 SECOND;\n",
    "expiredcount": "INSERT INTO expiredcount SELECT count(k) AS n FROM expired "
    "WINDOW TIME SIZE 3 SECONDS;\n",
}

FAILING = {
    "ratio": "INSERT INTO ratio SELECT e1.v AS v1, e2.v AS v2, 12 / (e2.v - e1.v) AS r "
    "FROM PATTERN EVERY e1=a -> e2=b[k = e1.k] WITHIN 1 SECOND;\n",
    "guarded": "INSERT INTO guarded SELECT e1.k AS k, e1.v AS v1, e2.v AS v2 "
    "FROM PATTERN EVERY e1=a -> e2=c[100 / (v - e1.v) > 10] PARTITION BY k;\n",
}


@pytest.mark.parametrize("seed", [1, 2])
def test_followed_by(spark: Any, tmp_path: Any, seed: int) -> None:
    _check(_case(FOLLOWED_BY, {"keyed"}, seed), spark, tmp_path)


def test_and_or(spark: Any, tmp_path: Any) -> None:
    _check(_case(LOGICAL, {"overlap", "orthen"}, 3), spark, tmp_path)


def test_counts(spark: Any, tmp_path: Any) -> None:
    _check(_case(COUNTS, {"collected", "maybe", "atmost"}, 4), spark, tmp_path)


def test_sequences(spark: Any, tmp_path: Any) -> None:
    _check(_case(SEQUENCES, {"stars", "counted"}, 5), spark, tmp_path)


@pytest.mark.parametrize("seed", [6, 7])
def test_absence(spark: Any, tmp_path: Any, seed: int) -> None:
    _check(_case(ABSENCE, {"leading", "notor"}, seed), spark, tmp_path)


def test_a_pattern_feeds_windows(spark: Any, tmp_path: Any) -> None:
    _check(_case(DOWNSTREAM, set(), 8), spark, tmp_path)


def test_failures_are_dead_letters(spark: Any, tmp_path: Any) -> None:
    case = _case(FAILING, {"guarded"}, 9)
    ref = check_case(case, spark, None, tmp_path)
    assert ref.streams["ratio"] and ref.streams["guarded"]
    assert ref.dead, "no condition or SELECT failed: the case tests nothing"


def test_all_at_once(spark: Any, tmp_path: Any) -> None:
    """The same statements with the whole input in one micro-batch."""
    _check(
        _case({**ABSENCE, **COUNTS}, {"leading", "notor", "collected", "maybe", "atmost"}, 10, None),
        spark,
        tmp_path,
    )
