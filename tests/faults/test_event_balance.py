"""The balance: every record read is accounted for, once, on both engines.

    events in = applied + dead-lettered + filtered + late (+ events in windows still open)

The script filters readings (WHERE), computes a value that fails for some events (a division by
zero in a Map), and aggregates the rest in one-minute TIME windows with a 10-second watermark
(another division, which fails for some events) into a Postgres table. The input, three files read
as three micro-batches on Spark, holds good readings, poison records (malformed JSON, a wrong type,
a missing field), readings the WHERE drops, readings whose Map or aggregate expression fails, late
readings, a blank line (no record), and a last reading an hour later that moves the watermark past
every other window, so that they all fire; its own window stays open, as the last window of a
bounded input always does (docs/language.md: incomplete windows never fire), which is the one event
neither engine counts as done.

"Applied" counts events here: the `n` (count(*)) of the table's rows; the engine's own `applied`
counts the rows it stored, checked against the table. Every number of the summary line is checked
against the input and against what the run left (rows and dead letters), and the two engines must
report the same numbers and write the same rows.

Both engines decide late events in each stream's arrival order (docs/language.md, "Order"); the
late readings here arrive two micro-batches after the watermark passed the end of their window.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from run_helpers import Summary, cep_run, dead_letters

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

SCRIPT = """
CREATE STREAMSCHEMA readings WITH id integer, site varchar(10), v integer, d integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 10 SECONDS;
CREATE DATASTORE pg TYPE postgresql;
CREATE TABLE per_minute (site varchar(10), minute timestamp, n bigint, total bigint, worst double,
  PRIMARY KEY (site, minute)) IN pg;
INSERT INTO kept SELECT id, site, v, d, 1000 / v AS inv, ts FROM readings WHERE site <> 'test';
INSERT INTO TABLE per_minute SELECT site, window_start() AS minute, count(*) AS n, sum(v) AS total,
  max(v / d) AS worst FROM kept WINDOW TIME SIZE 1 MINUTE GROUP BY site;
"""
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def reading(
    i: int, seconds: int, site: str | None = None, v: int | None = None, d: int = 2
) -> dict[str, Any]:
    ts = (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"id": i, "site": site or "ab"[i % 2], "v": i % 7 + 1 if v is None else v, "d": d, "ts": ts}


def build_files() -> tuple[list[list[str]], dict[str, list[Any]]]:
    """Three files of JSON lines, and what each record is: "good" (a reading), "input" (the
    record's text), "map", "aggregate", "filtered", "late", "open" (readings).

    Event times rise through each file (the watermark is max event time - 10 s). The Map and
    aggregate failures and the filtered readings never carry a file's largest event time: on Spark
    they do not reach the window's watermark (docs/guarantees.md)."""
    kinds: dict[str, list[Any]] = {
        k: [] for k in ("good", "input", "map", "aggregate", "filtered", "late", "open")
    }
    files: list[list[str]] = []
    i = 0

    def add(lines: list[str], kind: str, rec: dict[str, Any] | str) -> None:
        kinds[kind].append(rec)
        lines.append(rec if isinstance(rec, str) else json.dumps(rec))

    for f, (start, end) in enumerate([(0, 180), (180, 360), (360, 480)]):
        lines: list[str] = []
        if f == 2:
            # Behind the watermark of file 0 (170 - 10 s), in windows [0, 60) and [60, 120) that it
            # closed: Spark (batch 2) drops them, the reference (watermark 340 s) too.
            add(lines, "late", reading(900, 30, site="a"))
            add(lines, "late", reading(901, 70, site="a"))
            add(lines, "late", reading(902, 100, site="b"))
        for s in range(start, end, 10):
            i += 1
            add(lines, "good", reading(i, s))
            if s == start + 40:
                add(lines, "aggregate", reading(800 + f, s, d=0))  # max(v / d)
            if s == start + 50:
                add(lines, "filtered", reading(500 + f, s, site="test"))
                add(lines, "map", reading(600 + f, s, v=0))  # 1000 / v
                lines.append("")  # a blank line is no record
            if s == start + 60:
                add(lines, "input", f'{{"id": {700 + f}, "site": "a", "v": ')  # malformed JSON
                bad = reading(710 + f, s)
                bad["v"] = "many"
                add(lines, "input", json.dumps(bad))  # wrong type
                bad = reading(720 + f, s)
                del bad["d"]
                add(lines, "input", json.dumps(bad))  # missing field
        files.append(lines)
    # An hour later: moves the watermark past every window above; its own stays open.
    add(files[-1], "open", reading(999, 3600))
    return files, kinds


def expected_rows(good: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    groups: dict[tuple[str, datetime], list[dict[str, Any]]] = {}
    for r in good:
        ts = datetime.fromisoformat(r["ts"].replace("Z", "+00:00"))
        groups.setdefault((r["site"], ts.replace(second=0)), []).append(r)
    return sorted(
        (site, minute, len(rs), sum(r["v"] for r in rs), max(r["v"] / r["d"] for r in rs))
        for (site, minute), rs in groups.items()
    )


def table(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT site, minute, n, total, worst FROM per_minute ORDER BY site, minute"
        ).fetchall()
    return [(s, m.astimezone(UTC) if m.tzinfo else m.replace(tzinfo=UTC), n, t, w) for s, m, n, t, w in rows]


def test_every_record_is_applied_dead_lettered_filtered_or_late(
    pg_db: str, pg_reference_db: str, tmp_path: Path
) -> None:
    began = time.monotonic()
    files, kinds = build_files()
    (tmp_path / "in").mkdir()
    mtime = time.time() - 600
    for k, lines in enumerate(files):  # in name and modification-time order: one batch each
        path = tmp_path / "in" / f"part-{k}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        mtime += 10
        os.utime(path, (mtime, mtime))
    script = tmp_path / "balance.cpl"
    script.write_text(SCRIPT, encoding="utf-8")

    def args(pg: str, name: str) -> list[str]:
        return ["--source", f"readings=file:{tmp_path / 'in'}", "--store", f"pg={pg}",
                "--dead-letter", f"file:{tmp_path / name / 'dead'}"]  # fmt: skip

    with ThreadPoolExecutor(1) as pool:  # the reference runs while Spark starts
        reference = pool.submit(cep_run, script, "local", args(pg_reference_db, "ref"), tmp_path)
        spark = cep_run(
            script, "spark", [*args(pg_db, "spark"), "--max-files-per-trigger", "1"], tmp_path,
            checkpoint=tmp_path / "ck",
        )  # fmt: skip
        ref = reference.result()

    records = sum(1 for lines in files for line in lines if line.strip())
    want = expected_rows(kinds["good"])
    dead_want = len(kinds["input"]) + len(kinds["map"]) + len(kinds["aggregate"])
    summaries: list[Summary] = []
    for engine, run, url in (("spark", spark, pg_db), ("local", ref, pg_reference_db)):
        s = run.summary
        summaries.append(s)
        rows = table(url)
        applied_events = sum(n for _, _, n, _, _ in rows)
        # the balance, from the reported numbers and the events the table's rows hold
        open_ = len(kinds["open"])
        assert s.events_in == applied_events + s.dead + s.filtered + s.late + open_, (
            engine,
            s,
            applied_events,
        )
        # ... and each number against the input and what the run left behind
        assert rows == want, engine
        assert s.events_in == records, (engine, s)
        assert s.applied == len(rows) and s.out == 0, (engine, s)
        assert (s.dead, s.filtered, s.late) == (dead_want, len(kinds["filtered"]), len(kinds["late"])), (
            engine,
            s,
        )
        dead = dead_letters(tmp_path / ("spark" if engine == "spark" else "ref") / "dead")
        stages = sorted(d["stage"] for d in dead if d["stage"] != "late")
        assert stages == sorted(
            ["input"] * len(kinds["input"])
            + ["Map"] * len(kinds["map"])
            + ["Aggregate"] * len(kinds["aggregate"])
        ), engine
        assert len(stages) == s.dead, engine
        ids = sorted(d["event"][0] for d in dead if d["stage"] in ("Map", "Aggregate"))
        assert ids == sorted(r["id"] for r in kinds["map"] + kinds["aggregate"]), engine
        late = sorted(d["event"][0] for d in dead if d["stage"] == "late")
        # Both engines dead-letter late events, stage "late", decided in arrival order.
        assert late == sorted(r["id"] for r in kinds["late"]), engine
    assert replace(summaries[0], engine="") == replace(summaries[1], engine=""), summaries
    print(f"{summaries[0]}; whole test {time.monotonic() - began:.0f} s")
