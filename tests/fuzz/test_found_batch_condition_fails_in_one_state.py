"""Found by an outside differential test (issue 38): a BATCH window's STOP that fails on an event
that arrives while no window is open. The reference evaluates START only while no window is open and
STOP only on the events after the one that opened it (docs/language.md, "BATCH window"), so such a
failure is no failure; Spark evaluated both on every event, before the window's state, and
dead-lettered all four events (`cannot cast 'a%b' to boolean`). Fixed in deployer/spark/windows/window_state.py:
the conditions' failures are decided inside the state, where it is known which one is evaluated.

The second case makes both fail where they are evaluated (START on a closed window, STOP inside an
open one, in two groups, across micro-batches): the refused events are dead-lettered, belong to no
window, and the windows go on.
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import Case, case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

STOP_WHILE_CLOSED = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA sb WITH k integer, volume long, evtime timestamp, tag string, "
        "b1 boolean, price double, score float TIMESTAMP BY evtime WATERMARK 1 sec;\n"
        "INSERT INTO o2 SELECT (k % 2) AS g, count(*) AS a1, (count(*) + (-1)) AS a2, count(price) AS a3, "
        "max(k) AS a4 FROM sb WINDOW BATCH START (NOT b1) STOP CAST(tag AS boolean) GROUP BY (k % 2);\n",
        "inputs": {
            "sb": [
                [
                    '{"k": 1, "volume": 0, "evtime": "2026-03-01T00:00:30.005Z", "tag": "a%b", "b1": true, '
                    '"price": 0.25, "score": 0.5}',
                    '{"k": 99, "volume": 0, "evtime": "2026-03-01T00:01:31.005Z", "tag": "NULL", "b1": true, '
                    '"price": 2.0, "score": 0.25}',
                    '{"k": 99, "volume": 2147483648, "evtime": "2026-03-01T00:01:31.005Z", "tag": "-3", '
                    '"b1": true, "price": 0.5, "score": -1.5}',
                    '{"k": 99, "volume": null, "evtime": "2026-03-01T00:01:32.005Z", "tag": "\\tx\\n", '
                    '"b1": false, "price": 0.0, "score": 1.0}',
                ]
            ]
        },
        "sinks": ["o2"],
        "ordered": {"o2": ["g"]},
        "partitions": 1,
    }
)

BOTH_FAIL_WHERE_EVALUATED = case_from_dict(
    {
        "script": "CREATE STREAMSCHEMA sb WITH k integer, tag string, v integer, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO o SELECT k, count(*) AS n, max(tag) AS mx FROM sb WINDOW BATCH "
        "START CAST(tag AS boolean) STOP 10 / v < 2 GROUP BY k;\n",
        "inputs": {
            "sb": [
                [
                    # closed: START fails (dead letter); v = 0 would fail STOP, which is not evaluated
                    '{"k": 1, "tag": "zz", "v": 0, "ts": "2026-03-01T00:00:01Z"}',
                    # opens the window; its STOP is not evaluated (v = 0)
                    '{"k": 1, "tag": "true", "v": 0, "ts": "2026-03-01T00:00:02Z"}',
                    # open: STOP fails (dead letter); START would too, and is not evaluated
                    '{"k": 1, "tag": "bad", "v": 0, "ts": "2026-03-01T00:00:03Z"}',
                    '{"k": 1, "tag": "false", "v": 1, "ts": "2026-03-01T00:00:04Z"}',
                    '{"k": 2, "tag": "true", "v": 1, "ts": "2026-03-01T00:00:04Z"}',
                ],
                [
                    # closes k = 1's window (10 / 10 < 2)
                    '{"k": 1, "tag": "x", "v": 10, "ts": "2026-03-01T00:00:05Z"}',
                    '{"k": 2, "tag": "x", "v": 0, "ts": "2026-03-01T00:00:06Z"}',
                    '{"k": 2, "tag": "true", "v": 20, "ts": "2026-03-01T00:00:07Z"}',
                    # closed again: START fails; STOP (v = 0) is not evaluated
                    '{"k": 1, "tag": "nope", "v": 0, "ts": "2026-03-01T00:00:08Z"}',
                    '{"k": 2, "tag": "false", "v": 0, "ts": "2026-03-01T00:00:09Z"}',
                ],
            ]
        },
        "sinks": ["o"],
        "ordered": {"o": ["k"]},
        "max_files": 1,
        "partitions": 2,
    }
)


@pytest.mark.parametrize(
    "case", [STOP_WHILE_CLOSED, BOTH_FAIL_WHERE_EVALUATED], ids=["stop-while-closed", "both"]
)
def test_engines_agree(case: Case, spark: Any, tmp_path: Any) -> None:
    check_case(case, spark, None, tmp_path)
