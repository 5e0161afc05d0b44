"""A checkpoint that is missing, truncated or written by a different script is refused with a clear
error, never silently restarted from zero (deployer.spark.run.checkpoint).

A first run (Spark, in this process, `--until-idle`) prices calls into a Postgres table (append) and
writes an hourly TIME window aggregate to a file sink, with `--checkpoint DIR`. New input files then
arrive, and `cep run` (the real CLI, a subprocess) is pointed at a damaged or foreign checkpoint:

  (a) the latest offsets file of the table's query truncated,
  (b) the table's query's sub-directory gone,
  (c) the script changed incompatibly (the window is 2 hours, not 1),
  (d) a non-empty directory that is not a checkpoint of `cep run`.

Each must fail with an `error:` line that names the problem, before Spark starts: the table, the
sink, the dead letters and the checkpoint are byte for byte what they were. Unguarded, (b) would
price every call a second time. Last (e), a compatible rerun (its lines moved) over the same
checkpoint resumes: every call is in the table once, and no hourly window is emitted twice or with
a total that counts a call twice. While that rerun (the CLI) runs, it holds the checkpoint: a run
started beside it is refused, naming its process.
"""

from __future__ import annotations

import io
import os
import random
import re
import subprocess
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fault_helpers import CEP, Feeder, Row, generate, rows, run_env

from cpl.compiler import compile_script
from deployer.engine import RunRequest
from deployer.runner import run_script
from deployer.spark.run.checkpoint import LOCK, MANIFEST, CheckpointGuard, CheckpointRefused

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

SCRIPT = """CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE DATASTORE crm TYPE postgresql;
CREATE TABLE call_log (id integer, caller integer, cost integer, ts timestamp) IN crm;
INSERT INTO priced SELECT id, caller, duration * 10 + 10 AS cost, ts FROM calls WHERE duration >= 10;
INSERT INTO TABLE call_log SELECT id, caller, cost, ts FROM priced;
INSERT INTO hourly SELECT caller, window_start() AS hour, sum(cost) AS total, count(*) AS calls
  FROM priced WINDOW TIME SIZE 1 HOUR GROUP BY caller;
"""
FILES, PER_FILE = 6, 40  # two runs' worth: ~3.5 hours of event time


class Run:
    """One test's files, and `cep run` over them: in this process (Spark runs) or as the CLI."""

    def __init__(self, tmp_path: Path, store: str) -> None:
        self.tmp = tmp_path
        self.store = store
        self.feeder = Feeder(tmp_path / "in")
        self.checkpoint = tmp_path / "checkpoint"
        self.out, self.dead = tmp_path / "out", tmp_path / "dead"

    def args(self, script: Path, checkpoint: Path) -> list[str]:
        return [
            str(script),
            "--source",
            f"calls=file:{self.feeder.directory}",
            "--sink",
            f"hourly=file:{self.out}",
            "--store",
            f"crm={self.store}",
            "--dead-letter",
            f"file:{self.dead}",
            "--checkpoint",
            str(checkpoint),
            "--until-idle",
            "--master",
            "local[2]",
        ]

    def in_process(self, text: str) -> str:
        out = io.StringIO()
        run_script(
            RunRequest(
                graph=compile_script(text).graph,
                sources={"calls": f"file:{self.feeder.directory}"},
                sinks={"hourly": f"file:{self.out}"},
                stores={"crm": self.store},
                dead_letter=f"file:{self.dead}",
                until_idle=True,
                checkpoint=str(self.checkpoint),
                master="local[2]",
            ),
            out=out,
        )
        return out.getvalue()

    def cli(self, text: str, checkpoint: Path | None = None) -> subprocess.CompletedProcess[str]:
        script = self.tmp / "calls.cpl"
        script.write_text(text, encoding="utf-8")
        return subprocess.run(
            [str(CEP), "run", *self.args(script, checkpoint or self.checkpoint)],
            env=run_env(self.tmp),
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )

    def state(self) -> dict[str, Any]:
        """Everything a run may change: the table, and every file of the sink, the dead letters
        and the checkpoint."""
        files = {
            str(p.relative_to(self.tmp)): p.read_bytes()
            for d in (self.out, self.dead, self.checkpoint)
            if d.exists()
            for p in sorted(d.rglob("*"))
            if p.is_file()
        }
        table = sorted(rows(self.store, "SELECT id, caller, cost, ts FROM call_log"))
        return {"table": table, "files": files}

    def refused(self, text: str, checkpoint: Path | None = None) -> str:
        """Run the CLI, which must refuse; its `error:` line. Nothing may have changed."""
        before = self.state()
        done = self.cli(text, checkpoint)
        output = done.stdout + done.stderr
        assert done.returncode == 1, output[-3000:]
        errors = [line for line in output.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, output[-3000:]
        assert "Traceback" not in output and "--debug" not in errors[0], output[-3000:]
        assert self.state() == before, "a refused run changed the table, the sink or the checkpoint"
        return errors[0]


def hourly_truth(events: list[Row]) -> dict[tuple[int, datetime], tuple[int, int]]:
    """(caller, hour) -> (total cost, calls), from the input itself."""
    out: dict[tuple[int, datetime], tuple[int, int]] = {}
    for e in events:
        if e["duration"] < 10:
            continue
        ts = datetime.fromisoformat(e["ts"].replace("Z", "+00:00"))
        key = (e["caller"], ts.replace(minute=0, second=0))
        total, calls = out.get(key, (0, 0))
        out[key] = (total + e["duration"] * 10 + 10, calls + 1)
    return out


def sink_rows(directory: Path) -> list[dict[str, Any]]:
    import json

    return [
        json.loads(line)
        for p in sorted(directory.glob("*.jsonl"))
        for line in p.read_text(encoding="utf-8").splitlines()
    ]


def holds_lock(process: subprocess.Popen[str], lock: Path) -> bool:
    """Whether `process` takes the flock on `lock` and writes its id there before it ends (read from
    /proc/locks: probing the lock by taking it could make the process's own attempt fail)."""
    inode = f":{os.stat(lock).st_ino} "
    while process.poll() is None:
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            mine = "FLOCK" in fields and str(process.pid) in fields and inode in line
            if mine and lock.read_text().strip() == str(process.pid):
                return True
        time.sleep(0.05)
    return False


def test_damaged_foreign_or_incompatible_checkpoints_are_refused_good_ones_resume(
    spark: Any, pg_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CEP_DATA_DIR", str(tmp_path / "cep-data"))
    monkeypatch.setenv("CEP_SHUFFLE_PARTITIONS", "2")
    files = generate(random.Random(15), files=FILES, per_file=PER_FILE, callers=3)
    run = Run(tmp_path, pg_db)
    run.feeder.add(files[:3])
    first = run.in_process(SCRIPT)
    assert "done (spark)" in first, first
    manifest = run.checkpoint / MANIFEST
    assert manifest.is_file()
    started = sorted(p.name for p in run.checkpoint.iterdir() if p.is_dir())
    assert started == ["inputs", "sink_hourly", "table_call_log"]
    priced_first = len(run.state()["table"])
    assert priced_first > 0 and sink_rows(run.out)

    run.feeder.add(files[3:])  # a run that did not refuse would have new input to write

    # (d) a foreign, non-empty directory
    foreign = tmp_path / "not-a-checkpoint"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    error = run.refused(SCRIPT, foreign)
    assert f"cannot use {foreign} as a checkpoint: it is not empty and has no {MANIFEST}" in error
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]

    # (c) the window changed: the sink's query would misread its state
    error = run.refused(SCRIPT.replace("SIZE 1 HOUR", "SIZE 2 HOURS"))
    assert error.startswith(
        f"error: cannot resume from checkpoint {run.checkpoint}: it was written by a different script"
    )
    assert (
        "output sink 'hourly': the window aggregate of line 7: window changed from TIME SIZE 1 HOUR "
        "ADVANCE 1 HOUR to TIME SIZE 2 HOURS ADVANCE 2 HOURS" in error
    )
    assert "use a new --checkpoint directory to start over" in error

    # (a) the latest offsets file of the table's query, truncated
    offsets = run.checkpoint / "table_call_log" / "offsets"
    latest = max((p for p in offsets.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    whole = latest.read_bytes()
    assert (
        whole.startswith(b"v1\n{") and len(whole.splitlines()) == 3
    )  # Spark's format, as the guard reads it
    latest.write_bytes(whole[: len(whole) // 2])
    error = run.refused(SCRIPT)
    assert re.search(rf"{re.escape(str(latest))} (line 2 is not JSON|has 2 line\(s\))", error), error
    latest.write_bytes(whole)

    # (b) the table's query's checkpoint deleted
    query = run.checkpoint / "table_call_log"
    query.rename(tmp_path / "kept")
    error = run.refused(SCRIPT)
    assert f"the checkpoint of table:call_log, {query}, is missing though an earlier run started it" in error
    (tmp_path / "kept").rename(query)

    # (e) a compatible script (every line moved) resumes and writes only what is new; while it
    # runs, a second run on the same checkpoint is refused.
    script = tmp_path / "calls-v2.cpl"
    script.write_text("-- billing, second version\n\n" + SCRIPT, encoding="utf-8")
    rerun = subprocess.Popen(
        [str(CEP), "run", *run.args(script, run.checkpoint)],
        env=run_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert holds_lock(rerun, run.checkpoint / LOCK), "the rerun never locked its checkpoint"
        with pytest.raises(CheckpointRefused) as beside:
            CheckpointGuard.open(run.checkpoint, compile_script(SCRIPT).graph, {"calls": "file:x"}, {})
        assert str(beside.value).startswith(
            f"--checkpoint {run.checkpoint} is in use by another run (process {rerun.pid})"
        )
        second, _ = rerun.communicate(timeout=300)
    finally:
        rerun.kill()
    assert rerun.returncode == 0 and "done (spark)" in second, second[-3000:]
    events = [e for f in files for e in f]
    priced = Counter((e["id"], e["caller"], e["duration"] * 10 + 10) for e in events if e["duration"] >= 10)
    table = Counter(
        (i, c, cost) for i, c, cost, _ in rows(pg_db, "SELECT id, caller, cost, ts FROM call_log")
    )
    assert max(table.values()) == 1, "a call was priced twice"
    assert table == priced
    assert len(priced) > priced_first
    truth = hourly_truth(events)
    emitted = Counter(
        (r["caller"], datetime.fromisoformat(r["hour"].replace("Z", "+00:00"))) for r in sink_rows(run.out)
    )
    assert max(emitted.values()) == 1, "a window was emitted twice"
    for r in sink_rows(run.out):
        key = (r["caller"], datetime.fromisoformat(r["hour"].replace("Z", "+00:00")))
        assert (r["total"], r["calls"]) == truth[key], key
    # windows closed by the second run's events, over state the first run left in the checkpoint
    last_first_run = max(datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) for f in files[:3] for e in f)
    assert any(hour >= last_first_run.replace(minute=0, second=0) for _, hour in emitted)
    assert not [p for p in run.dead.rglob("*") if p.is_file() and p.stat().st_size]
