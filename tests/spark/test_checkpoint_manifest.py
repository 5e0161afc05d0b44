"""The manifest `cep run --checkpoint DIR` keeps (deployer.spark.run.checkpoint), without Spark: what it
records, what it refuses and what it lets resume. The query checkpoints here are written by hand in
the format Spark 4 writes them (copied from a real run); tests/faults/test_checkpoint_guard.py runs
the same checks against checkpoints Spark wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cpl.compiler import compile_script
from deployer.spark.run import held, layout
from deployer.spark.run.checkpoint import (
    FORMAT,
    LOCK,
    MANIFEST,
    CheckpointGuard,
    CheckpointRefused,
    arrival_log,
)
from deployer.spark.run.compat import incompatibilities
from deployer.spark.run.query_logs import query_problems
from operators import graph as g

SCRIPT = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE DATASTORE crm TYPE postgresql;
CREATE TABLE call_log (id integer, caller integer, cost integer, ts timestamp) IN crm;
INSERT INTO priced SELECT id, caller, duration * 10 + 10 AS cost, ts FROM calls WHERE duration >= 10;
INSERT INTO TABLE call_log SELECT id, caller, cost, ts FROM priced;
INSERT INTO hourly SELECT caller, window_start() AS hour, sum(cost) AS total
  FROM priced WINDOW TIME SIZE 1 HOUR GROUP BY caller;
"""
SOURCES = {"calls": "file:/data/in"}
SINKS = {"hourly": "file:/data/out"}
QUERIES = ["sink:hourly", "table:call_log", "dead-letters"]

# A query checkpoint as Spark 4 writes it (no trailing newlines).
OFFSETS = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1795402660463,"conf":{"spark.sql.shuffle.partitions":"4"}}\n{"logOffset":%d}'
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'
SOURCE_LOG = 'v1\n{"path":"file:///data/in/calls-0000.jsonl","timestamp":1795402594195,"batchId":%d}'


def graph(text: str = SCRIPT) -> g.Graph:
    return compile_script(text).graph


def open_(
    d: Path, text: str = SCRIPT, sources: dict[str, str] = SOURCES, sinks: dict[str, str] = SINKS
) -> CheckpointGuard:
    """The guard of a run that ends at once: its lock is released (test_a_run_in_progress_holds_the_
    directory tests the lock), its `started` still records."""
    guard = CheckpointGuard.open(d, graph(text), sources, sinks)
    guard.release()
    return guard


def spark_query(qdir: Path, batches: int = 2) -> None:
    """What Spark leaves in a query's sub-directory after `batches` committed micro-batches."""
    for sub in ("offsets", "commits", "sources/0"):
        (qdir / sub).mkdir(parents=True)
    (qdir / "metadata").write_text('{"id":"8a272342-5d18-4d07-a325-cc548c879e70"}')
    (qdir / ".metadata.crc").write_bytes(b"crc\x00")
    for b in range(batches):
        (qdir / "offsets" / str(b)).write_text(OFFSETS % b)
        (qdir / "commits" / str(b)).write_text(COMMIT)
        (qdir / "sources" / "0" / str(b)).write_text(SOURCE_LOG % b)
        (qdir / "offsets" / f".{b}.crc").write_bytes(b"\x00")


def first_run(d: Path) -> CheckpointGuard:
    """A first run that started its queries and committed two batches in each, and logged the order
    its file source's files arrived in."""
    guard = open_(d)
    for q in QUERIES:
        spark_query(d / q.replace(":", "_"))
        guard.started(q)
    arrival_log(d, "calls").parent.mkdir()
    arrival_log(d, "calls").write_text("calls-0000.jsonl\ncalls-0001.jsonl\n")
    return guard


def refused(
    d: Path, text: str = SCRIPT, sources: dict[str, str] = SOURCES, sinks: dict[str, str] = SINKS
) -> str:
    with pytest.raises(CheckpointRefused) as info:
        open_(d, text, sources, sinks)
    return str(info.value)


def test_a_new_directory_gets_a_manifest_that_records_started_queries(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    open_(d)
    manifest = json.loads((d / MANIFEST).read_text())
    assert manifest["format"] == FORMAT and manifest["started"] == [] and manifest["outputs"] == {}
    first_run(d)
    manifest = json.loads((d / MANIFEST).read_text())
    assert manifest["started"] == QUERIES
    assert sorted(manifest["outputs"]) == ["sink 'hourly'", "table 'call_log'"]
    assert manifest["sources"] == {"calls": "file:/data/in"}
    # the same script resumes; so does one whose lines moved and whose filter changed (stateless)
    open_(d)
    open_(d, "-- moved\n" + SCRIPT.replace("duration >= 10", "duration >= 20"))
    assert not list(d.glob(".*.tmp"))


def test_an_empty_directory_is_a_new_checkpoint_and_a_foreign_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / f".{MANIFEST}.tmp").write_text('{"form')  # a first write cut short
    open_(tmp_path / "empty")
    assert (tmp_path / "empty" / MANIFEST).is_file()
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == [LOCK, MANIFEST]
    foreign = tmp_path / "foreign"
    (foreign / "sink_hourly").mkdir(parents=True)
    why = refused(foreign)
    assert f"cannot use {foreign} as a checkpoint: it is not empty and has no {MANIFEST}" in why
    assert "use a new --checkpoint directory" in why
    assert not (foreign / MANIFEST).exists() and not (foreign / LOCK).exists()
    # a lock file left by a first run that ended before writing its manifest does not count
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / LOCK).write_text("123\n")
    open_(tmp_path / "locked")
    (tmp_path / "file").write_text("x")
    assert "is a file, not a directory" in refused(tmp_path / "file")


def test_no_store_url_or_password_is_written(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    guard = CheckpointGuard.open(
        d, graph(), {"calls": "redis://app:S3cret-pw@cache:6379/0?stream=calls&password=S3cret-pw"}, SINKS
    )
    for q in QUERIES:
        guard.started(q)
    guard.release()
    text = (d / MANIFEST).read_text()
    assert "S3cret-pw" not in text and "redis://app:***@cache:6379/0" in text
    assert "crm" not in text and "postgresql" not in text  # stores are not compat's business


def test_an_incompatible_script_is_refused_with_every_reason(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    first_run(d)
    before = (d / MANIFEST).read_bytes()
    why = refused(d, SCRIPT.replace("SIZE 1 HOUR", "SIZE 2 HOURS"))
    assert why.startswith(f"cannot resume from checkpoint {d}: it was written by a different script")
    assert (
        "output sink 'hourly': the window aggregate of line 8: window changed from "
        "TIME SIZE 1 HOUR ADVANCE 1 HOUR to TIME SIZE 2 HOURS ADVANCE 2 HOURS" in why
    )
    assert why.endswith("the inputs are then read again from their beginning)")
    moved = refused(d, sources={"calls": "file:/data/elsewhere"})
    assert (
        "output sink 'hourly': input stream 'calls': source changed from file:/data/in to file:/data/elsewhere"
        in moved
    )
    assert "output table 'call_log': input stream 'calls'" in moved
    assert (d / MANIFEST).read_bytes() == before  # a refusal changes nothing


def test_a_limit_kept_in_a_second_aggregation_before_is_refused_where_the_window_now_holds_it(
    tmp_path: Path,
) -> None:
    # Before 2026-12-01 a LAST by time over a TIME window was always a second window aggregation of
    # Spark's (deployer.spark.output.in_window); without HAVING the window's own aggregation now holds
    # it (deployer.spark.windows.time_window_limit), with state of another layout.
    limited = SCRIPT.replace("GROUP BY caller;", "GROUP BY caller OUTPUT LAST EVERY 2 HOURS;")
    d = tmp_path / "ck"
    guard = open_(d, limited)
    spark_query(d / "sink_hourly")
    guard.started("sink:hourly")
    arrival_log(d, "calls").parent.mkdir()
    arrival_log(d, "calls").write_text("calls-0000.jsonl\n")
    manifest = d / MANIFEST
    text = manifest.read_text()
    assert "the window's aggregation" in text
    manifest.write_text(text.replace("the window's aggregation", "Spark's window aggregation"))
    why = refused(d, limited)
    assert (
        "output sink 'hourly': the OUTPUT clause of line 8: state changed from Spark's window aggregation "
        "to the window's aggregation" in why
    ), why
    manifest.write_text(text)
    open_(d, limited)  # as written now: resumes


def test_a_new_output_is_allowed_and_a_removed_one_keeps_its_signature(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    first_run(d)
    extra = (
        SCRIPT
        + "INSERT INTO longest SELECT caller, max(duration) AS d FROM calls WINDOW TIME SIZE 1 DAY GROUP BY caller;\n"
    )
    guard = open_(d, extra, sinks={**SINKS, "longest": "file:/data/longest"})
    spark_query(d / "sink_longest")
    guard.started("sink:longest")
    # A run without `hourly` leaves its checkpoint alone (not even its sub-directory is needed) ...
    (d / "sink_hourly").rename(tmp_path / "kept")
    open_(d, extra, sinks={"longest": "file:/data/longest"})
    (tmp_path / "kept").rename(d / "sink_hourly")
    # ... but `hourly` back with another window would misread its old state.
    why = refused(
        d, extra.replace("SIZE 1 HOUR", "SIZE 2 HOURS"), sinks={**SINKS, "longest": "file:/data/longest"}
    )
    assert "output sink 'hourly'" in why and "window changed" in why
    assert "longest" not in why


def test_a_missing_query_checkpoint_is_refused_unless_the_run_no_longer_has_it(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    first_run(d)
    (d / "table_call_log").rename(tmp_path / "gone")
    why = refused(d)
    assert f"the checkpoint of table:call_log, {d / 'table_call_log'}, is missing" in why
    assert "Restore it, or use a new --checkpoint directory" in why
    # A removed table is not resumed, so its checkpoint is not needed.
    without = SCRIPT.replace("INSERT INTO TABLE call_log SELECT id, caller, cost, ts FROM priced;\n", "")
    open_(d, without)
    # A dead-letter query's checkpoint is always needed (its name follows node ids).
    (tmp_path / "gone").rename(d / "table_call_log")
    (d / "dead-letters").rename(tmp_path / "gone")
    assert "the checkpoint of dead-letters" in refused(d)


def test_a_lost_arrival_log_is_refused(tmp_path: Path) -> None:
    """Which files of a source were read, and in which order, is its arrival log: without it a restart
    could read a file twice or never."""
    d = tmp_path / "ck"
    first_run(d)
    arrival_log(d, "calls").unlink()
    assert f"the arrival log of stream 'calls', {arrival_log(d, 'calls')}, is missing" in refused(d)


@pytest.mark.parametrize(
    ("file", "damage", "expected"),
    [
        ("offsets/1", lambda t: t[: len(t) // 2], "line 2 is not JSON"),
        ("offsets/1", lambda t: t.rsplit("\n", 1)[0], "has 2 line(s), fewer than the 3"),
        ("offsets/1", lambda t: "", "is empty"),
        ("commits/1", lambda t: t[:-3], "line 2 is not JSON"),
        ("commits/1", lambda t: t[2:], "does not start with a version line"),
        ("sources/0/1", lambda t: t[:30], "line 2 is not JSON"),
        ("metadata", lambda t: t[:10], "truncated or unreadable"),
    ],
)
def test_a_truncated_file_is_refused_naming_it(
    tmp_path: Path, file: str, damage: object, expected: str
) -> None:
    d = tmp_path / "ck"
    first_run(d)
    path = d / "table_call_log" / file
    path.write_text(damage(path.read_text()))  # type: ignore[operator]
    why = refused(d)
    assert f"{path} " in why and expected in why


def test_only_the_latest_log_files_are_read_and_spark_formats_pass(tmp_path: Path) -> None:
    q = tmp_path / "q"
    spark_query(q, batches=3)
    (q / "offsets" / "0").write_text("garbage")  # an old file Spark no longer reads
    (q / "offsets" / "2").write_text('v1\n{}\n-\n{"logOffset":2}\n')  # "-": a source without offset
    (q / "sources" / "0" / "2").rename(q / "sources" / "0" / "2.compact")
    (q / "offsets" / ".3.tmp").write_text("")  # a temporary file
    assert query_problems(q, "sink:x") == []
    (q / "offsets" / "2").unlink()
    (q / "offsets" / ".2.crc").unlink()
    assert query_problems(q, "sink:x") == [
        f"{q / 'commits'} records batch 2, but {q / 'offsets'} has no file for it"
    ]
    assert query_problems(tmp_path / "none", "sink:x")[0].endswith(
        "is missing though an earlier run started it"
    )


def test_an_unreadable_newer_or_older_manifest_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    first_run(d)
    text = (d / MANIFEST).read_text()
    (d / MANIFEST).write_text(text[: len(text) // 2])
    assert f"{d / MANIFEST} is truncated or unreadable" in refused(d)
    (d / MANIFEST).write_text(json.dumps({**json.loads(text), "format": 99}))
    assert "has format 99, which this version of cep does not know" in refused(d)
    # Format 1: file sources read in modification-time order, no Sequencer state: Spark cannot resume it.
    (d / MANIFEST).write_text(json.dumps({**json.loads(text), "format": 1}))
    assert "was written by an earlier version of cep (format 1)" in refused(d)


def test_a_run_in_progress_holds_the_directory(tmp_path: Path) -> None:
    """Two runs on one checkpoint would write the same batches' log entries: the second is refused,
    naming the first's process, until the first releases the lock or its process dies."""
    d = tmp_path / "ck"
    first_run(d)
    running = CheckpointGuard.open(d, graph(), SOURCES, SINKS)
    before = (d / MANIFEST).read_bytes()
    why = refused(d)
    assert why.startswith(f"--checkpoint {d} is in use by another run (process {os.getpid()})")
    assert "give this run another --checkpoint directory" in why
    assert (d / MANIFEST).read_bytes() == before  # a refusal changes nothing
    running.release()
    open_(d)
    # A run in another process holds it until that process dies, even by SIGKILL.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from cpl.compiler import compile_script; "
            "from deployer.spark.run.checkpoint import CheckpointGuard; "
            "guard = CheckpointGuard.open(Path(sys.argv[1]), compile_script(sys.argv[2]).graph, "
            "{'calls': 'file:/data/in'}, {'hourly': 'file:/data/out'}); print('held', flush=True); time.sleep(60)",
            str(d),
            SCRIPT,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert f"in use by another run (process {holder.pid})" in refused(d)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    open_(d)


def test_compat_compares_a_time_window_with_a_tuple_window() -> None:
    """A stateful operator with more parts than the one it replaces is a difference, not a crash."""
    tuple_window = SCRIPT.replace("WINDOW TIME SIZE 1 HOUR", "WINDOW TUPLE SIZE 10")
    tuple_window = tuple_window.replace("window_start() AS hour, ", "")
    problems = incompatibilities(graph(), {"sinks": SINKS}, graph(tuple_window), {"sinks": SINKS})
    assert any("buffered schema changed from none to" in p for p in problems), problems


MERGED = SCRIPT.replace(
    "INSERT INTO priced SELECT id, caller, duration * 10 + 10 AS cost, ts FROM calls WHERE duration >= 10;",
    "CREATE STREAMSCHEMA more WITH id integer, caller integer, duration integer, ts timestamp TIMESTAMP BY ts;\n"
    "INSERT INTO both SELECT * FROM calls, more;\n"
    "INSERT INTO priced SELECT id, caller, duration * 10 + 10 AS cost, ts FROM both WHERE duration >= 10;",
)
MERGED_SOURCES = {**SOURCES, "more": "file:/data/more"}


def test_the_streams_sequenced_together_must_not_change(tmp_path: Path) -> None:
    """Streams that meet in a merge pass the Sequencer together (deployer/spark/streams/merge_sequencer.py):
    a run that would sequence them otherwise, or a checkpoint of an earlier version, which
    sequenced them one by one, is refused; a format-3 checkpoint without merges still resumes."""
    d = tmp_path / "ck"
    open_(d, MERGED, MERGED_SOURCES)
    assert json.loads((d / MANIFEST).read_text())["merges"] == [["calls", "more"]]
    open_(d, MERGED, MERGED_SOURCES)
    apart = MERGED.replace("FROM calls, more", "FROM calls")
    why = refused(d, apart, MERGED_SOURCES)
    assert "which Spark sequences together, changed from [calls, more] to [none]" in why, why
    problems = incompatibilities(
        graph(MERGED), {"sources": MERGED_SOURCES}, graph(apart), {"sources": MERGED_SOURCES}
    )
    assert any("changed from [calls, more] to [none]" in p for p in problems), problems
    # a checkpoint of the earlier version: format 3, no merges recorded
    old = tmp_path / "old"
    open_(old)
    manifest = json.loads((old / MANIFEST).read_text())
    del manifest["merges"]
    (old / MANIFEST).write_text(json.dumps({**manifest, "format": 3}))
    why = refused(old, MERGED, MERGED_SOURCES)
    assert "written by an earlier version of cep (format 3), which sequenced the streams of a merge" in why
    open_(old)
    assert json.loads((old / MANIFEST).read_text())["format"] == FORMAT


WINDOWED = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
INSERT INTO hourly SELECT caller, window_start() AS hour, sum(duration) AS total
  FROM calls WINDOW TIME SIZE 1 HOUR GROUP BY caller;
"""
# the same, with a second statement that reads `calls` where its order shows
WITH_ALERTS = WINDOWED + "INSERT INTO alerts SELECT id, caller FROM calls WHERE duration > 3600;\n"


def test_a_stream_left_unheld_must_not_come_to_need_its_sequencer(tmp_path: Path) -> None:
    """`calls` reaches only a TIME window, so its queries pass no Sequencer (deployer.spark.run.held):
    a script that reads it where its order shows would need one, which their state has not; the
    other way round is allowed (the stream stays held)."""
    sinks = {**SINKS, "alerts": "file:/data/alerts"}
    d = tmp_path / "ck"
    open_(d, WINDOWED)
    assert layout.unheld_streams(d, held.unheld(graph(WINDOWED), SOURCES, SINKS)) == {"calls"}
    (d / "sink_hourly" / "state").mkdir(parents=True)  # the window's query has kept state
    why = refused(d, WINDOWED, SOURCES, {**SINKS, "calls": "file:/data/calls"})  # a sink on the way
    assert "with other --source or --sink bindings" in why, why
    assert "the events of stream 'calls' reached its TIME windows as they arrived" in why, why
    why = refused(d, WITH_ALERTS, SOURCES, sinks)
    assert "the events of stream 'calls' reached its TIME windows as they arrived" in why, why
    with pytest.raises(CheckpointRefused, match="stream 'calls'"):
        layout.unheld_streams(d, held.unheld(graph(WITH_ALERTS), SOURCES, sinks))
    problems = incompatibilities(
        graph(WINDOWED),
        {"sources": SOURCES, "sinks": SINKS},
        graph(WITH_ALERTS),
        {"sources": SOURCES, "sinks": sinks},
    )
    assert any("stream 'calls'" in p for p in problems), problems
    open_(d, WINDOWED)  # the same script resumes
    # held before (a checkpoint with state and no record: an earlier layout's), unheld now: kept held
    (d / held.RECORD).unlink()
    open_(d, WINDOWED)
    assert layout.unheld_streams(d, ["calls"]) == set()
    assert not incompatibilities(
        graph(WITH_ALERTS),
        {"sources": SOURCES, "sinks": sinks},
        graph(WINDOWED),
        {"sources": SOURCES, "sinks": SINKS},
    )


STATELESS = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp;
INSERT INTO free SELECT id, caller FROM calls WHERE duration < 10;
"""


def test_a_sink_with_a_query_of_its_own_keeps_it_beside_new_stateless_sinks(tmp_path: Path) -> None:
    """The guard plans a run's shared queries as the deployment does (layout.planned): a stateless
    sink whose query of its own has started (its sub-directory is there) keeps it, so a new
    stateless sink beside it is taken, alone in a query of its own, and two more share one; the
    guard would otherwise see the first one leave its query for a shared one, which would write
    its rows again from the beginning, and refuse the run."""
    d = tmp_path / "ck"
    sinks = {"free": "file:/data/free"}
    guard = open_(d, STATELESS, sinks=sinks)
    spark_query(d / "sink_free")
    guard.started("sink:free")
    arrival_log(d, "calls").parent.mkdir()
    arrival_log(d, "calls").write_text("calls-0000.jsonl\n")
    odd = STATELESS + "INSERT INTO odd SELECT id FROM calls WHERE id % 2 = 1;\n"
    guard = open_(d, odd, sinks={**sinks, "odd": "file:/data/odd"})
    assert guard._shares == {}  # each its own query
    spark_query(d / "sink_odd")
    guard.started("sink:odd")
    more = odd + "INSERT INTO even SELECT id FROM calls WHERE id % 2 = 0;\n"
    more += "INSERT INTO long SELECT id FROM calls WHERE duration >= 600;\n"
    both = {**sinks, "odd": "file:/data/odd", "even": "file:/data/even", "long": "file:/data/long"}
    guard = open_(d, more, sinks=both)
    assert guard._shares == {"sinks:stateless": ["sink 'even'", "sink 'long'"]}
