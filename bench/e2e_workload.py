"""End to end: files arrive in a directory → ReadSQL enrichment → 1-second TIME window → Postgres.

`cep run` (Spark, local mode, as a user starts it) watches an input directory. A feeder writes a
file of CDR events every `INTERVAL_S`, each event stamped with the wall-clock time of its file's
arrival (written under a hidden name, then renamed, so Spark never sees half a file). The script
prices each call with the caller's plan read from Postgres and materializes calls and spend per
second into the table `spend`. A poller reads `spend` every 20 ms and notes when each second's
row first appears (committed, since it is written in one transaction with its ledger entry).

Latency of an event = the moment its second's row appears minus the moment its file arrived. A window
closes only when a later event moves the watermark past its end, so latency includes up to one
window (1 s) of waiting by definition, plus the micro-batches that read, price, aggregate and
write. The warm-up (JVM start, first batches) is not counted: at least `WARMUP_S` seconds, and until
the first window has reached Postgres (on a loaded machine the job takes longer to start; up to
`WARMUP_LIMIT_S`). p50 and p99 are over events. The window row also gives issue 40's own measure,
from the watermark passing a window's end to the window's row in Postgres (`watermark_p50_s`, ...,
over windows: `_after_watermark`), which leaves out the wait for the window to end.

No baseline: a hand-written job with the same exactly-once write and watermark semantics would be
this project. `events_per_s` is the rate the feeder offered and the job kept up with.

`run_stateless` runs the stateless pipeline instead (STATELESS_SCRIPT: each event priced by the
same ReadSQL and appended to the table `calls_priced`, exactly once, no window): latency of an event
= the moment its row is visible in Postgres minus the moment its file arrived. Its stream has no
WATERMARK (the events come in order): the Sequencer then holds no event back, where with one each
file would wait for a later file's events to move the stream's watermark past its own
(deployer.spark.streams.sequencer), here 250 ms. Events carry their
number `n`; the poller reads `max(n)` (an index the table is created with beforehand: the project
accepts an existing table of the declared columns), and a file's events are visible once it covers
the file's last one (a micro-batch's rows are committed together, files are read in arrival order).
"""

from __future__ import annotations

import bisect
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

SCRIPT = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MILLISECOND;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT fee FROM plans WHERE idcaller = ?' RETURNS (fee double);
CREATE TABLE spend (second timestamp PRIMARY KEY, calls bigint, total double) IN crm;
INSERT INTO priced SELECT idcaller, duration * p.fee AS cost, ts FROM cdr ON SQL plan_of, p, idcaller, fee;
INSERT INTO TABLE spend SELECT window_start() AS second, count(*) AS calls, sum(cost) AS total
  FROM priced WINDOW TIME SIZE 1 SECOND;
"""

STATELESS_SCRIPT = """
CREATE STREAMSCHEMA cdr WITH n bigint, idcaller integer, duration integer, ts timestamp TIMESTAMP BY ts;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY plan_of ON crm AS 'SELECT fee FROM plans WHERE idcaller = ?' RETURNS (fee double);
CREATE TABLE calls_priced (n bigint, cost double, ts timestamp) IN crm;
INSERT INTO TABLE calls_priced SELECT n, duration * p.fee AS cost, ts FROM cdr ON SQL plan_of, p, idcaller, fee;
"""

INTERVAL_S = 0.25
WATERMARK_S = 0.001  # SCRIPT's WATERMARK
WARMUP_S = 25.0
WARMUP_LIMIT_S = 600.0


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


PER_FILE = 500


def _start_job(tmp: str, inbox: Path, pg_url: str, script: str) -> subprocess.Popen[bytes]:
    """`cep run` of `script`, reading `inbox`, in a process group of its own."""
    Path(tmp, "e2e.cpl").write_text(script)
    env = {**os.environ, "CEP_SPARK_LOG_LEVEL": "ERROR"}
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "cep"),
            "run",
            str(Path(tmp, "e2e.cpl")),
            "--source",
            f"cdr=file:{inbox}",
            "--store",
            f"crm={pg_url}",
            "--checkpoint",
            str(Path(tmp, "ckpt")),
            "--dead-letter",
            f"file:{Path(tmp, 'dead')}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(Path(tmp, "job.log"), "w"),
        env=env,
        start_new_session=True,
    )


def _watch(pg_url: str, seen: dict[datetime, float], stop: threading.Event) -> None:
    """Record when each window's row first appears in Postgres, until `stop`."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        while not stop.is_set():
            try:
                rows = conn.execute("SELECT second FROM spend").fetchall()
            except psycopg.errors.UndefinedTable:
                rows = []
            now = time.time()
            for (second,) in rows:
                seen.setdefault(second, now)
            time.sleep(0.02)


def _watch_rows(pg_url: str, seen: dict[int, float], stop: threading.Event) -> None:
    """Record when each event number first is at most the largest visible in `calls_priced`, until
    `stop` (as {that largest number: when it first appeared})."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        while not stop.is_set():
            top = conn.execute("SELECT max(n) FROM calls_priced").fetchone()
            now = time.time()
            if top is not None and top[0] is not None:
                seen.setdefault(int(top[0]), now)
            time.sleep(0.02)


def _feed(
    inbox: Path,
    job: subprocess.Popen[bytes],
    log: Path,
    files: list[tuple[float, int]],
    done: Callable[[float], bool],
    numbered: bool = False,
) -> None:
    """Files of PER_FILE events stamped with the time they arrive, every INTERVAL_S, until `done(now)`;
    each file's (arrival time, events) appended to `files`; `numbered`: each event with its number
    `n` (0, 1, ...) instead of an `idreceiver`."""
    while not done(time.time()):
        if job.poll() is not None:
            raise RuntimeError(f"cep run exited with {job.returncode}: {log.read_text()[-2000:]}")
        now = time.time()
        ts = datetime.fromtimestamp(now, UTC).isoformat()
        n = len(files) * PER_FILE
        lines = [
            json.dumps(
                {
                    "idcaller": (n + i) * 7919 % 100_000,
                    **({"n": n + i} if numbered else {"idreceiver": i}),
                    "duration": (n + i) % 600,
                    "ts": ts,
                }
            )
            for i in range(PER_FILE)
        ]
        hidden = inbox / f".f{len(files):06d}.jsonl"
        hidden.write_text("\n".join(lines) + "\n")
        hidden.rename(inbox / f"f{len(files):06d}.jsonl")
        files.append((now, PER_FILE))
        time.sleep(max(0.0, INTERVAL_S - (time.time() - now)))


def _close_windows(inbox: Path, seen: dict[datetime, float], last: datetime) -> None:
    """Let the last measured windows close: later events push the watermark past them."""
    deadline = time.time() + 60
    while time.time() < deadline and last not in seen:
        ts = datetime.fromtimestamp(time.time(), UTC).isoformat()
        (inbox / f"tail{time.time_ns()}.jsonl").write_text(
            json.dumps({"idcaller": 1, "idreceiver": 1, "duration": 1, "ts": ts}) + "\n"
        )
        time.sleep(INTERVAL_S)


def run(pg_url: str, quick: bool) -> dict[str, Any]:
    """The window pipeline (SCRIPT): latency from a file's arrival to its window's row."""
    from sql_workloads import load_plans

    load_plans(pg_url, 100_000)
    seen: dict[datetime, float] = {}

    def close(inbox: Path, files: list[tuple[float, int]], end: float) -> None:
        _close_windows(inbox, seen, datetime.fromtimestamp(end - 2, UTC).replace(microsecond=0))

    return _measured(
        pg_url,
        quick,
        SCRIPT,
        lambda stop: _watch(pg_url, seen, stop),
        seen,
        close,
        lambda files, begin, end: _latencies(files, seen, begin, end - 2),
        numbered=False,
    )


def _measured(
    pg_url: str,
    quick: bool,
    script: str,
    watch: Callable[[threading.Event], None],
    seen: dict[Any, float],
    close: Callable[[Path, list[tuple[float, int]], float], None],
    latencies: Callable[[list[tuple[float, int]], float, float], dict[str, Any]],
    *,
    numbered: bool,
) -> dict[str, Any]:
    """`cep run` of `script` fed files until its first result is in Postgres (`seen`, filled by
    `watch` in a thread), then for the measured period; `close` lets the period's last results out;
    `latencies(files, begin, end)` of the period's files, with the job's log tail."""
    measured_s = 15.0 if quick else 40.0
    with tempfile.TemporaryDirectory() as tmp:
        inbox = Path(tmp, "in")
        inbox.mkdir()
        job = _start_job(tmp, inbox, pg_url, script)
        stop = threading.Event()
        poller = threading.Thread(target=watch, args=(stop,), daemon=True)
        poller.start()
        start = time.time()
        files: list[tuple[float, int]] = []
        log = Path(tmp, "job.log")
        try:
            _feed(
                inbox,
                job,
                log,
                files,
                lambda now: now >= start + WARMUP_LIMIT_S or (now >= start + WARMUP_S and bool(seen)),
                numbered=numbered,
            )
            if not seen:
                raise RuntimeError(
                    f"no result reached Postgres in {WARMUP_LIMIT_S:.0f} s: {log.read_text()[-2000:]}"
                )
            begin = time.time()
            _feed(inbox, job, log, files, lambda now: now >= begin + measured_s, numbered=numbered)
            close(inbox, files, begin + measured_s)
        finally:
            stop.set()
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
            poller.join(timeout=5)
            log_tail = Path(tmp, "job.log").read_text()[-3000:]
    return {**latencies(files, begin, begin + measured_s), "log_tail": log_tail}


def _latencies(
    files: list[tuple[float, int]], seen: dict[datetime, float], begin: float, end: float
) -> dict[str, Any]:
    """From each file's arrival to its window's row in Postgres, for the files of [begin, end]."""
    latencies: list[float] = []
    missing = 0
    for arrived, count in files:
        if arrived < begin or arrived > end:
            continue
        second = datetime.fromtimestamp(arrived, UTC).replace(microsecond=0)
        if second not in seen:
            missing += count
            continue
        latencies.extend([seen[second] - arrived] * count)
    closing = _after_watermark(files, seen, begin, end)
    return {
        **_summary(latencies, missing, "no window of the measured period reached Postgres"),
        **{f"watermark_{k}": v for k, v in _percentiles(closing).items()},
        "windows": len(closing),
    }


def _after_watermark(
    files: list[tuple[float, int]], seen: dict[datetime, float], begin: float, end: float
) -> list[float]:
    """Issue 40's window latency: from the moment the stream's watermark passed a window's end to its
    row in Postgres, for the windows that end in [begin, end]. The watermark passes the end of the
    second s when an event of time at least s + 1 s + WATERMARK arrives: each event's time is its
    file's arrival, so that moment is the arrival of the first such file."""
    arrivals = sorted(arrived for arrived, _ in files)
    out = []
    for second, at in seen.items():
        closes = second.timestamp() + 1 + WATERMARK_S
        if not begin <= closes - WATERMARK_S <= end:
            continue
        k = bisect.bisect_left(arrivals, closes)
        if k < len(arrivals):
            out.append(at - arrivals[k])
    return out


def run_stateless(pg_url: str, quick: bool) -> dict[str, Any]:
    """The stateless pipeline (STATELESS_SCRIPT): latency from a file's arrival to its events' rows."""
    from sql_workloads import load_plans

    load_plans(pg_url, 100_000)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS calls_priced")
        conn.execute(
            "CREATE TABLE calls_priced (n bigint, cost double precision, ts timestamp with time zone)"
        )
        conn.execute("CREATE INDEX ON calls_priced (n)")
    seen: dict[int, float] = {}
    return _measured(
        pg_url,
        quick,
        STATELESS_SCRIPT,
        lambda stop: _watch_rows(pg_url, seen, stop),
        seen,
        lambda inbox, files, end: _close_rows(inbox, seen, len(files) * PER_FILE - 1),
        lambda files, begin, end: _row_latencies(files, seen, begin),
        numbered=True,
    )


def _close_rows(inbox: Path, seen: dict[int, float], last: int) -> None:
    """Wait for the last measured events, with later events (numbered after them) arriving: with a
    WATERMARK they would be what releases them."""
    deadline, k = time.time() + 60, 0
    while time.time() < deadline and not any(top >= last for top in seen):
        ts = datetime.fromtimestamp(time.time(), UTC).isoformat()
        k += 1
        line = json.dumps({"n": last + k, "idcaller": 1, "duration": 1, "ts": ts})
        (inbox / f"tail{time.time_ns()}.jsonl").write_text(line + "\n")
        time.sleep(INTERVAL_S)


def _row_latencies(files: list[tuple[float, int]], seen: dict[int, float], begin: float) -> dict[str, Any]:
    """From each file's arrival to the first moment its last event's number was visible, for the
    files that arrived after `begin`."""
    tops = sorted(seen.items())
    latencies: list[float] = []
    missing = 0
    for k, (arrived, count) in enumerate(files):
        if arrived < begin:
            continue
        last = (k + 1) * PER_FILE - 1
        at = next((when for top, when in tops if top >= last), None)
        if at is None:
            missing += count
            continue
        latencies.extend([at - arrived] * count)
    return _summary(latencies, missing, "no event of the measured period reached Postgres")


def _summary(latencies: list[float], missing: int, none_seen: str) -> dict[str, Any]:
    """A row's figures from its events' latencies (RuntimeError `none_seen` when there are none)."""
    if not latencies:
        raise RuntimeError(none_seen)
    return {
        "events": len(latencies),
        "events_per_s": PER_FILE / INTERVAL_S,
        **_percentiles(latencies),
        "missing_events": missing,
    }


def _percentiles(latencies: list[float]) -> dict[str, float]:
    """p50, p95 and p99 of `latencies` (none of an empty list)."""
    if not latencies:
        return {}
    return {f"p{p}_s": percentile(latencies, p) for p in (50, 95, 99)}
