"""A Python worker that starts too slowly does not fail the run (deployer.spark.run.progress.TRANSIENT).

Spark waits 10 s (hard-coded) for a Python worker it starts to connect back, and fails the query
when one does not: on a loaded machine a worker that imports pyspark, pyarrow and pandas can take
that long. `cep run` starts such a query again from its checkpoint, which replays its unfinished
batch, and the run ends as it would have. Here the interpreter Spark starts its workers with is a
real one behind a wrapper that makes the first streaming source runner start 12 s late.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from fault_helpers import reference_run, run_env, run_to_end, spark_run_args

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SCRIPT = """
CREATE STREAMSCHEMA calls WITH caller integer, duration integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO long_calls SELECT caller, duration, ts FROM calls WHERE duration >= 10;
"""
RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def _slow_python(tmp_path: Path) -> Path:
    marker = tmp_path / "slowed-once"
    wrapper = tmp_path / "slow-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do\n'
        f'  if [ "$a" = {RUNNER} ] && mkdir {marker} 2>/dev/null; then sleep 12; fi\n'
        "done\n"
        f'exec {sys.executable} "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def _rows(directory: Path) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for p in sorted(directory.glob("*.jsonl")):
        out += [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line]
    return out


def test_a_worker_too_slow_to_start_restarts_its_query_and_loses_nothing(tmp_path: Path) -> None:
    script = tmp_path / "calls.cpl"
    script.write_text(SCRIPT, encoding="utf-8")
    inp = tmp_path / "in"
    inp.mkdir()
    for f in range(3):
        lines = [
            json.dumps({"caller": k, "duration": 5 * k, "ts": f"2026-01-01T00:0{f}:{k:02d}Z"})
            for k in range(6)
        ]
        (inp / f"calls-{f}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    slow = _slow_python(tmp_path)
    args = spark_run_args(
        script, tmp_path, [f"calls=file:{inp}"], sinks=[f"long_calls=file:{tmp_path / 'out'}"]
    )
    env = run_env(tmp_path, PYSPARK_PYTHON=str(slow))
    code, _, out = run_to_end(args, env, tmp_path, tmp_path / "spark.log")
    assert code == 0, out[-3000:]
    assert (tmp_path / "slowed-once").exists(), "the wrapper never slowed a worker down"
    assert "failed to connect back" in out and "starting it again" in out, out[-3000:]
    reference_run(
        script, [f"calls=file:{inp}"], [], tmp_path, "--sink", f"long_calls=file:{tmp_path / 'ref-out'}"
    )
    want = _rows(tmp_path / "ref-out")
    assert len(want) == 12
    assert _rows(tmp_path / "out") == want
    assert os.path.isdir(tmp_path / "checkpoint")
