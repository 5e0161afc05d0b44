"""Found by the differential fuzzer (tests/fuzz): seed 99102 (12-minute soak), as shrunk.

A stream (s1) merged with a trigger's rows (a Union: they pass one Sequencer), read by two pattern
queries, the trigger's rows also by the shared query of the stateless sinks: the reference
dead-lettered s1's three late events, Spark none. A source two queries read has its dead letters
written by the first of them (deployer/spark/run/queries.py `_by_readers`), and a stream of a merge
counts as read by every query that reads one of its streams; the shared query came first, but it
reads only the trigger's rows, so it passes the Sequencer and never unpacks s1's late events, where
they are spooled. Fixed: the shared query writes a stream's dead letters only if it reads that
stream itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

from cpl.compiler import compile_script
from deployer.spark.run.queries import plan_queries, store_kinds

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE TRIGGER tr1 AT '*/20 * * * * ?';\n"
        "CREATE TRIGGER tr2 AT START;\n"
        "CREATE STREAMSCHEMA s1 WITH k integer, v integer, b boolean, x double, ts timestamp "
        "TIMESTAMP BY ts;\n"
        "CREATE STREAMSCHEMA s2 WITH k integer, v integer, b boolean, x double, ts timestamp "
        "TIMESTAMP BY ts;\n"
        "INSERT INTO m3 SELECT CAST(NULL AS integer) AS k, CAST(0 AS integer) AS v, ((FALSE AND "
        "FALSE)) AS b, CAST((-2.25 * 1e3) AS double) AS x, triggered_time AS ts FROM tr1;\n"
        "INSERT INTO u4 SELECT * FROM m3, s1;\n"
        "INSERT INTO m8 SELECT e1.b AS p5, match_time() AS t6, e1.b AS c7 FROM PATTERN EVERY "
        "NOT u4[(abs(k) <> 1)] FOR 2 SECONDS -> e1=u4[(nullif(x, x) BETWEEN coalesce(x, 3.0) "
        "AND x)] WITHIN 1 MINUTE;\n"
        "INSERT INTO f9 SELECT * FROM m8 WHERE (NOT ((-1 BETWEEN 2147483647 AND "
        "-2147483648)));\n",
        "inputs": {
            "s1": [
                ['{"k": 2147483647, "v": -1, "b": false, "x": -2.25, "ts": "2026-01-01T00:00:10Z"}'],
                [
                    '{"k": 0, "v": 5, "b": false, "x": 1.5, "ts": "2026-01-01T00:00:20Z"}',
                    '{"k": 4, "v": 7, "b": false, "x": 100.125, "ts": "2026-01-01T00:00:30Z"}',
                    '{"k": 2147483647, "v": 2, "b": false, "x": 100.125, "ts": "2026-01-01T00:00:30.25Z"}',
                    '{"k": 2, "v": 4, "b": null, "x": 1.5, "ts": "2026-01-01T00:00:40.25Z"}',
                ],
                [
                    "{not json",
                    '{"k": 100, "v": 3, "b": false, "x": -2.25, "ts": "2026-01-01T00:00:49.25Z"}',
                    '{"k": 100, "v": 4, "b": false, "x": 0.1, "ts": "2026-01-02T00:00:49.25Z"}',
                    '{"k": null, "v": 0, "b": true, "x": null, "ts": "2026-01-02T00:00:48.25Z"}',
                    '{"k": -2147483648, "v": -1, "b": false, "x": null, "ts": "2026-01-02T00:00:45.25Z"}',
                    '{"k": 2147483647, "v": 5, "b": true, "x": 1000000000000000.0, "ts": '
                    '"2026-01-02T00:00:45.25Z"}',
                ],
            ],
            "s2": [[], [], ['{"k": null, "v": 5, "b": false, "x": 1.5, "ts": "2026-01-01T00:00:10Z"}'], []],
        },
        "sinks": ["tr1", "tr2", "m3", "m8", "f9"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": None,
        "ordered": {"tr1": [], "tr2": [], "m3": [], "u4": [], "m8": [], "f9": []},
        "mtimes": "reversed",
        "partitions": 2,
        "trigger_clock": "2026-01-01T00:00:00Z/2026-01-01T00:00:00Z",
    }
)


def test_the_late_events_are_written_by_a_query_that_reads_the_stream() -> None:
    sources = {s: "file:x" for s in ("s1", "s2")} | {t: "trigger:" for t in ("tr1", "tr2")}
    plan = plan_queries(compile_script(CASE.script).graph, CASE.sinks, sources, store_kinds(None))
    writers = [q.name for q in plan if "late-s1" in q.spooled]
    assert writers == ["sink:m8"], [(q.name, q.spooled) for q in plan]


def test_engines_agree(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
