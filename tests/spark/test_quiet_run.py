"""A run prints what it does and nothing else; Spark's own output goes to the run's log file.

The real `cep run --engine spark --until-idle` (a subprocess, as `make demo` runs it) over
examples/daily_bill.cpl: two streams, a ReadSQL in Spark's Python workers against the embedded
SQLite store, a TIME window through the Sequencer (transformWithStateInPandas, whose Python workers
print their progress), a materialized table, and a malformed record that is dead-lettered. Its
standard output and error hold only the run's own lines: no stack trace, no log line of Spark's
(`ERROR`, `WARN`), no `StackOverflowError` from a stopped query, no `BrokenPipeError` of a Python
worker. The log file it names is in the checkpoint, and holds Spark's log and its workers' output.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

CEP = Path(sys.executable).parent / "cep"

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "daily_bill.cpl"
# Every line the run may print, and nothing else (deployer/runner.py, deployer/spark/engine.py, reporter.py)
OWN_LINES = re.compile(r"^(data store crm: sqlite:///|spark log: /|progress: |done \(spark\): )")


def _calls(directory: Path, day: int, callers: int = 4) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    rows = [
        {"idcaller": c, "idreceiver": 9, "duration": 30 + c, "timestamp": f"2026-01-0{day}T0{c}:00:00Z"}
        for c in range(1, callers + 1)
    ]
    lines = [json.dumps(r) for r in rows] + (['{"idcaller": "not a number"}'] if day == 2 else [])
    (directory / f"day-{day}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_run_prints_its_own_lines_and_spark_logs_to_its_file(tmp_path: Path) -> None:
    data = tmp_path / "cep-data"
    data.mkdir()
    with sqlite3.connect(data / "crm.sqlite3") as conn:
        conn.execute("CREATE TABLE plans (idcaller integer PRIMARY KEY, idplan integer, fee double)")
        conn.executemany("INSERT INTO plans VALUES (?, ?, ?)", [(c, c, 0.5 * c) for c in range(1, 5)])
    conn.close()
    for stream in ("cdr1", "cdr2"):
        for day in (1, 2, 3):
            _calls(tmp_path / "in" / stream, day)
    checkpoint = tmp_path / "checkpoint"
    inputs = [f"{s}=file:{tmp_path / 'in' / s}" for s in ("cdr1", "cdr2")]
    args = [str(SCRIPT), "--engine", "spark", "--until-idle", "--master", "local[2]"]
    args += ["--source", inputs[0], "--source", inputs[1], "--sink", f"priced=file:{tmp_path / 'out'}"]
    done = subprocess.run(
        [str(CEP), "run", *args, "--checkpoint", str(checkpoint)],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("CEP_")},
            "CEP_DATA_DIR": str(data),
            "CEP_SHUFFLE_PARTITIONS": "2",
            "SPARK_LOCAL_DIRS": str(tmp_path / "spark-local"),
            "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false pyspark-shell",
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "done (spark): 26 events in, 24 out, 8 applied, 2 dead-lettered, 0 filtered, 0 late" in output, (
        output
    )
    stray = [line for line in output.splitlines() if not OWN_LINES.match(line)]
    assert stray == [], output[-3000:]
    for noise in ("Traceback", "Exception", "ERROR", "WARN", "StackOverflowError", "BrokenPipeError"):
        assert noise not in output, output[-3000:]

    logs = [line.split(": ", 1)[1] for line in output.splitlines() if line.startswith("spark log: ")]
    assert len(logs) == 1, output
    log = Path(logs[0])
    assert log.parent == checkpoint / "logs" and log.is_file(), log
    text = log.read_text(errors="replace")
    assert "Using Spark's default log4j profile" in text, text[-3000:]  # log4j's console, in the file
    assert re.search(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO) ", text, re.MULTILINE), text[-3000:]
    # what the Python workers of the Sequencer print passes through the JVM, into the file
    assert "TransformWithStateInPandas Python worker" in text, text[-3000:]
    with sqlite3.connect(data / "crm.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM daily_bill").fetchone() == (
            8,
        )  # 4 callers, days 1 and 2 (no event closes day 3)
    conn.close()
