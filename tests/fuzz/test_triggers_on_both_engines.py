"""Triggers on both engines: every form of CREATE TRIGGER (../shared/CPL.md §7) read as a stream by
maps, windows, a database read, a periodic update, a merge with a stream of events and a pattern,
on the reference executor and on Spark under one controlled clock (CEP_TRIGGER_CLOCK=START/NOW,
docs/language.md "Triggers"): the same rows in the same order, the same tables and counts
(tests/fuzz/fuzz_harness.check_case). The events of `s` lie inside the clock's range, so that ticks
and events interleave in event time, in four files that Spark reads one per micro-batch.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from fuzz_case import Case, StoreTable
from fuzz_harness import check_case
from keyed_events import keyed_stream

pytestmark = [pytest.mark.spark]

# keyed_stream's events start at 2026-01-01T00:00:00Z and last some 20 seconds
CLOCK = "2025-12-31T23:59:57.500Z/2026-01-01T00:00:41Z"
STREAMS = (
    "CREATE STREAMSCHEMA s WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;\n"
)
TRIGGERS = (
    "CREATE TRIGGER every3 AT EVERY 3 SECONDS;\n"
    "CREATE TRIGGER boot AT START;\n"
    "CREATE TRIGGER cron AT '*/7 * * * * ?';\n"
)
STORE = (
    "CREATE DATASTORE db TYPE sqlite;\n"
    "CREATE SQLQUERY over_limit ON db AS 'SELECT k, balance FROM accounts WHERE balance < 0 ORDER BY k' "
    "RETURNS (k integer, balance integer);\n"
    "CREATE SQLQUERY checked ON db AS 'UPDATE accounts SET checks = checks + 1 WHERE balance < 0';\n"
)
ACCOUNTS = StoreTable(
    "accounts",
    "CREATE TABLE accounts (k integer PRIMARY KEY, balance integer, checks integer)",
    ("k", "balance", "checks"),
    ((1, 10, 0), (2, -5, 0), (3, -1, 0)),
)

READS = {
    "ticks": "INSERT INTO ticks SELECT triggered_time FROM every3;\n",
    "started": "INSERT INTO started SELECT triggered_time AS at FROM boot;\n",
    "crons": "INSERT INTO crons SELECT triggered_time FROM cron WHERE triggered_time > TIMESTAMP '2026-01-01 00:00:10';\n",
    "per_ten": (
        "INSERT INTO per_ten SELECT window_start() AS at, count(*) AS n, max(triggered_time) AS last "
        "FROM every3 WINDOW TIME SIZE 10 SECONDS;\n"
    ),
    "pairs": "INSERT INTO pairs SELECT min(triggered_time) AS a, max(triggered_time) AS b FROM cron WINDOW TUPLE SIZE 2;\n",
}
DATABASE = {
    "overdrawn": (
        "INSERT INTO overdrawn SELECT triggered_time, a.k, a.balance FROM every3 ON SQL over_limit, a, k, balance;\n"
    ),
    "alerts": (
        "INSERT INTO alerts SELECT a.k AS k, triggered_time FROM every3 ON SQL over_limit, a, k, balance "
        "GROUP BY a.k OUTPUT FIRST EVERY 10 SECONDS;\n"
    ),
    "maintained": "INSERT INTO maintained SELECT triggered_time, c.n AS updated FROM cron ON SQL checked, c, n;\n",
}
WITH_EVENTS = {
    "merged": ("INSERT INTO merged SELECT triggered_time AS at FROM every3, beats;\n"),
    "followed": (
        "INSERT INTO followed SELECT e1.triggered_time AS tick, e2.k AS k, e2.v AS v FROM PATTERN "
        "EVERY e1=every3 -> e2=s[v > 6] WITHIN 2 SECONDS;\n"
    ),
    "latest": (
        "INSERT INTO latest SELECT k, max(v) AS top FROM s WINDOW TIME SIZE 5 SECONDS GROUP BY k "
        "OUTPUT SNAPSHOT EVERY 5 SECONDS;\n"
    ),
}


def _case(statements: dict[str, str], seed: int, store: bool = False, beats: bool = False) -> Case:
    rng = random.Random(seed)
    inputs = {"s": keyed_stream(rng, 60, True)}
    script = STREAMS + TRIGGERS + (STORE if store else "")
    if beats:
        script += "CREATE STREAMSCHEMA beats WITH triggered_time timestamp TIMESTAMP BY triggered_time;\n"
        inputs["beats"] = [
            [f'{{"triggered_time": "2026-01-01T00:00:{s:02d}.500Z"}}' for s in range(a, a + 10, 2)]
            for a in (0, 10, 20)
        ]
    return Case(
        script=script + "".join(statements.values()),
        inputs=inputs,
        sinks=list(statements),
        store="sqlite" if store else None,
        tables=[ACCOUNTS] if store else [],
        compare_tables=["accounts"] if store else [],
        ordered={s: [] for s in statements},
        max_files=1,
    )


def _check(case: Case, spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CEP_TRIGGER_CLOCK", CLOCK)
    ref = check_case(case, spark, None, tmp_path)
    assert ref.error is None, ref.error
    empty = [s for s in case.sinks if not ref.streams.get(s)]
    assert not empty, f"nothing to compare: no rows in {empty}"


def test_every_form_read_by_maps_and_windows(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(_case(READS, 1), spark, tmp_path, monkeypatch)


def test_a_trigger_reads_and_updates_the_database(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(_case(DATABASE, 2, store=True), spark, tmp_path, monkeypatch)


def test_ticks_meet_events_in_a_merge_a_pattern_and_a_snapshot(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(_case(WITH_EVENTS, 3, beats=True), spark, tmp_path, monkeypatch)
