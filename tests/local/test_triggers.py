"""Triggers on the reference executor (docs/language.md, "Triggers"; ../shared/SIDDHI-SEMANTICS.md
§5, read on the controlled clock of CEP_TRIGGER_CLOCK=START/NOW): which ticks each form makes, that
they are events like any other (counted, windowed, joined to a database read), and the errors."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime
from pathlib import Path

import pytest

from cpl.compiler import compile_script
from deployer.local.driver import run_local
from deployer.runner import bind_stores
from deployer.settings import SettingsError
from stores.registry import StoreRegistry

CLOCK = "CEP_TRIGGER_CLOCK"


def _run(script: str, tmp_path: Path, stores: object | None = None) -> tuple[dict[str, list[dict]], object]:
    graph = compile_script(script).graph
    out = tmp_path / "out"
    sinks = {name: f"file:{out}" for name in graph.streams if name not in {s.stream for s in graph.sources()}}
    stats = run_local(graph, {}, sinks, stores, dead_letter=f"file:{tmp_path / 'dl'}", until_idle=True)
    rows: dict[str, list[dict]] = {}
    for f in sorted(out.glob("*.jsonl")) if out.exists() else []:
        rows[f.name.rsplit("-", 2)[0]] = [json.loads(x) for x in f.read_text().splitlines()]
    return rows, stats


def test_every_ticks_one_period_after_the_start_and_then_each_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CLOCK, "2026-01-01T00:00:30Z/2026-01-01T00:20:30Z")
    rows, stats = _run(
        "CREATE TRIGGER t AT EVERY 5 MINUTES;\nINSERT INTO o SELECT triggered_time FROM t;", tmp_path
    )
    # Siddhi: `at every 500 milliseconds` first fires at start + 500, not at the start; NOW is included
    assert [r["triggered_time"] for r in rows["o"]] == [
        "2026-01-01T00:05:30Z",
        "2026-01-01T00:10:30Z",
        "2026-01-01T00:15:30Z",
        "2026-01-01T00:20:30Z",
    ]
    assert stats.total_in == 4  # ticks are events in, as they are in Siddhi


def test_start_ticks_once_at_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLOCK, "2026-01-01T00:00:30.250Z/2026-01-02T00:00:00Z")
    rows, _ = _run(
        "CREATE TRIGGER boot AT START;\nINSERT INTO o SELECT triggered_time AS at FROM boot;", tmp_path
    )
    assert rows["o"] == [{"at": "2026-01-01T00:00:30.25Z"}]


def test_cron_fires_at_its_times_from_the_start_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLOCK, "2026-01-01T00:00:00Z/2026-01-01T01:00:00Z")
    rows, _ = _run(
        "CREATE TRIGGER t AT '0 */20 * * * ?';\nINSERT INTO o SELECT triggered_time FROM t;", tmp_path
    )
    # a fire time at the start itself counts (Quartz's first fire time is at or after its start)
    assert [r["triggered_time"][11:19] for r in rows["o"]] == ["00:00:00", "00:20:00", "00:40:00", "01:00:00"]


def test_cron_numbers_the_days_of_the_week_as_quartz_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2026-11-29 is a Sunday: Quartz's day 2 is Monday (croniter's would be Tuesday)
    monkeypatch.setenv(CLOCK, "2026-11-29T00:00:00Z/2026-12-13T00:00:00Z")
    script = (
        "CREATE TRIGGER mondays AT '0 0 12 ? * 2';\nCREATE TRIGGER weekdays AT '0 0 8 ? * MON-FRI';\n"
        "INSERT INTO m SELECT triggered_time FROM mondays;\nINSERT INTO w SELECT triggered_time FROM weekdays;"
    )
    rows, _ = _run(script, tmp_path)
    assert [r["triggered_time"] for r in rows["m"]] == ["2026-11-30T12:00:00Z", "2026-12-07T12:00:00Z"]
    assert len(rows["w"]) == 10 and all(r["triggered_time"].endswith("T08:00:00Z") for r in rows["w"])


def test_a_trigger_has_event_time_for_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLOCK, "2026-01-01T00:00:00Z/2026-01-01T03:30:00Z")
    script = (
        "CREATE TRIGGER t AT EVERY 20 MINUTES;\n"
        "INSERT INTO hourly SELECT window_start() AS hour, count(*) AS n FROM t WINDOW TIME SIZE 1 HOUR;"
    )
    rows, _ = _run(script, tmp_path)
    # ticks 00:20 … 03:20; the hours before the last tick's are complete: 00:00 holds 2, 01:00 and 02:00 3
    assert rows["hourly"] == [
        {"hour": "2026-01-01T00:00:00Z", "n": 2},
        {"hour": "2026-01-01T01:00:00Z", "n": 3},
        {"hour": "2026-01-01T02:00:00Z", "n": 3},
    ]


def test_a_periodic_database_read_is_a_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "crm.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE accounts (idcaller integer, balance double)")
        conn.executemany("INSERT INTO accounts VALUES (?, ?)", [(1, 10.0), (2, -5.0), (3, -1.5)])
    conn.close()
    monkeypatch.setenv(CLOCK, "2026-01-01T00:00:00Z/2026-01-01T00:15:00Z")
    monkeypatch.setenv("CEP_STORE_CRM_URL", f"sqlite:///{db}")
    script = (
        "CREATE TRIGGER every5 AT EVERY 5 MINUTES;\nCREATE DATASTORE crm TYPE sqlite;\n"
        "CREATE SQLQUERY over_limit ON crm AS 'SELECT idcaller, balance FROM accounts WHERE balance < 0' "
        "RETURNS (idcaller integer, balance double);\n"
        "INSERT INTO overdrawn SELECT triggered_time, a.idcaller, a.balance FROM every5 ON SQL over_limit, a, idcaller, balance;"
    )
    graph = compile_script(script).graph
    registry = StoreRegistry(bind_stores(graph, {}))
    try:
        out = tmp_path / "out"
        run_local(graph, {}, {"overdrawn": f"file:{out}"}, registry, until_idle=True)
    finally:
        registry.close()
    rows = [json.loads(x) for f in out.glob("*.jsonl") for x in f.read_text().splitlines()]
    assert [(r["triggered_time"][11:16], r["idcaller"], r["balance"]) for r in rows] == [
        ("00:05", 2, -5.0),
        ("00:05", 3, -1.5),
        ("00:10", 2, -5.0),
        ("00:10", 3, -1.5),
        ("00:15", 2, -5.0),
        ("00:15", 3, -1.5),
    ]


def test_without_a_controlled_clock_a_trigger_ticks_on_the_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CLOCK, raising=False)
    before = time.time()
    rows, _ = _run("CREATE TRIGGER boot AT START;\nINSERT INTO o SELECT triggered_time FROM boot;", tmp_path)
    (row,) = rows["o"]
    at = datetime.fromisoformat(row["triggered_time"].replace("Z", "+00:00")).timestamp()
    assert before - 0.001 <= at <= time.time()


def test_a_trigger_takes_no_source(tmp_path: Path) -> None:
    graph = compile_script("CREATE TRIGGER t AT START;\nINSERT INTO o SELECT * FROM t;").graph
    with pytest.raises(ValueError, match=r"declares it a trigger .* it takes no --source"):
        run_local(graph, {"t": f"file:{tmp_path}"}, {}, until_idle=True)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2026-01-01T00:00:00Z", "is not START/NOW"),
        ("2026-01-01T00:00:00Z/soon", "'soon' is not an ISO 8601 instant"),
        ("2026-01-02T00:00:00Z/2026-01-01T00:00:00Z", "NOW is before START"),
    ],
)
def test_a_clock_that_cannot_be_read_names_the_variable(
    value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CLOCK, value)
    graph = compile_script("CREATE TRIGGER t AT START;\nINSERT INTO o SELECT * FROM t;").graph
    with pytest.raises(SettingsError, match=message) as info:
        run_local(graph, {}, {}, until_idle=True)
    assert CLOCK in str(info.value)
