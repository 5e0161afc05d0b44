"""Found by the differential fuzzer (tests/fuzz): seed 7004 (30-minute soak).

Two stateless sinks (one shared query) that read a timed stream only through WHEREs that are always
false (`NOT ('b' > '_')`, `FALSE`). Spark's optimizer replaced each WHERE by an empty relation
(PruneFilters), with the observation that counts the events it drops: no sink's plan ran, so the
batch did not run at all and the Sequencer's state in it did not commit its batch (the query failed:
STATE_STORE_COMMIT_VALIDATION_FAILED); and the dropped events were not counted (filtered 0 where the
reference counts 7). PruneFilters is excluded (deployer/spark/run/session.py), and the shared query runs
a batch that no sink ran (deployer/spark/run/shared.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

CASE = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA s1 WITH k integer, v integer, n bigint, x double, d decimal(8, 2), "
        "ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO m1 SELECT k, n, ts, NULL AS c2 FROM s1 WHERE TRUE;\n"
        "INSERT INTO m3 SELECT *, substring(CASE WHEN TRUE THEN coalesce('_', 'a') END, 2) AS "
        "c4, k AS c5, '' AS c6 FROM m1 WHERE (NOT (('b' > '_')));\n"
        "INSERT INTO f7 SELECT * FROM s1 WHERE FALSE;\n",
        "inputs": {
            "s1": [
                [
                    '{"k": null, "v": 5, "n": 0, "x": null, "d": 0.00, "ts": "2026-01-01T00:00:10Z"}',
                    '{"k": 2, "v": null, "n": 1000, "x": 0.1, "d": 0.01, "ts": "2026-01-01T00:00:09Z"}',
                    '{"k": -2147483648, "v": null, "n": 0, "x": 1000000000000000.0, "d": 1.00, '
                    '"ts": "2026-01-01T00:00:11Z"}',
                    '{"k": -1, "v": 7, "n": 2, "x": -2.25, "d": 0.01, "ts": "2026-01-01T00:00:12Z"}',
                    '{"k": -1, "v": 7, "n": 0, "x": 0.1, "d": 0.00, "ts": "2026-01-01T00:00:17Z"}',
                ],
                [
                    '{"k": 0, "v": null, "n": 9223372036854775807, "x": null, "d": 1.00, "ts": '
                    '"2026-01-01T00:00:07Z"}',
                    '{"k": null, "v": 5, "n": 0, "x": 0.1, "d": 0.01, "ts": "2026-01-01T00:00:37Z"}',
                    '{"k": null, "v": 1, "n": -3, "x": 1000000000000000.0, "d": 0.00, "ts": '
                    '"2026-01-01T00:00:39Z"}',
                    '{"k": null, "v": 0, "n": -3, "x": -2.25, "d": 2.50, "ts": "2026-01-01T00:00:59Z"}',
                ],
            ]
        },
        "sinks": ["m3", "f7"],
        "store": None,
        "tables": [],
        "compare_tables": [],
        "max_files": 2,
        "ordered": {"m1": [], "m3": [], "f7": []},
        "mtimes": "increasing",
        "partitions": 2,
    }
)


def test_sinks_behind_where_always_false_count_their_events(spark: Any, tmp_path: Any) -> None:
    check_case(CASE, spark, None, tmp_path)
