"""What the poison, metacharacter and balance fault tests share: `cep run` as a subprocess on either
engine, its summary line, its dead letters, Redis hashes read back as bytes, and a simulated crash
that makes Spark replay the last micro-batch of every query.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from fault_helpers import run_env

CEP = Path(sys.executable).parent / "cep"

# `done (ENGINE): I events in, O out, A applied, D dead-lettered, F filtered, L late` (deployer/runner.py)
SUMMARY = re.compile(
    r"^done \((?P<engine>\w+)\): (?P<events_in>\d+) events in, (?P<out>\d+) out, (?P<applied>\d+) applied, "
    r"(?P<dead>\d+) dead-lettered, (?P<filtered>\d+) filtered, (?P<late>\d+) late$",
    re.MULTILINE,
)


@dataclass(frozen=True)
class Summary:
    engine: str
    events_in: int
    out: int
    applied: int
    dead: int
    filtered: int
    late: int


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str  # stdout and stderr

    @property
    def summary(self) -> Summary:
        found = SUMMARY.findall(self.output)
        assert len(found) == 1, f"no summary line (or several) in:\n{self.output[-3000:]}"
        engine, *counts = found[0]
        return Summary(engine, *(int(c) for c in counts))


def cep_run(
    script: Path,
    engine: str,
    args: list[str],
    tmp_path: Path,
    *,
    checkpoint: Path | None = None,
    timeout: float = 300,
) -> Run:
    """`cep run SCRIPT --engine ENGINE ARGS --until-idle` (Spark: local[2], with `checkpoint`)."""
    cmd = [str(CEP), "run", str(script), "--engine", engine, *args, "--until-idle"]
    if engine == "spark":
        assert checkpoint is not None
        cmd += ["--checkpoint", str(checkpoint), "--master", "local[2]"]
    done = subprocess.run(
        cmd,
        env=run_env(tmp_path, jvm_tmp=True),
        cwd=tmp_path,
        capture_output=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    run = Run(done.returncode, (done.stdout + done.stderr).decode("utf-8", errors="replace"))
    assert run.returncode == 0, f"cep run --engine {engine} failed:\n{run.output[-4000:]}"
    return run


def dead_letters(directory: Path) -> list[dict[str, Any]]:
    """Every dead letter under `directory`, file by file in name order (`.`/`_` files skipped)."""
    out: list[dict[str, Any]] = []
    if directory.is_dir():
        for f in sorted(directory.iterdir()):
            if f.is_file() and not f.name.startswith((".", "_")):
                # "\n" only: str.splitlines would also split at U+2028 or U+0085 inside a value
                out += [json.loads(line) for line in f.read_text(encoding="utf-8").split("\n") if line]
    return out


def files_of(directory: Path) -> dict[str, bytes]:
    """name -> content of the files in `directory` (what a replay must leave as it was)."""
    if not directory.is_dir():
        return {}
    return {f.name: f.read_bytes() for f in sorted(directory.iterdir()) if f.is_file()}


def with_db(redis_url: str, db: int) -> str:
    """The same Redis server, database `db`."""
    return re.sub(r"/\d+$", "", redis_url.rstrip("/")) + f"/{db}"


def redis_hashes(url: str, prefix: str) -> dict[bytes, dict[bytes, bytes]]:
    """key -> all its fields, as bytes, of the hashes whose key starts with `prefix`."""
    with redis.Redis.from_url(url) as client:
        keys = sorted(client.scan_iter(match=f"{prefix}*", count=1000))
        return {k: dict(client.hgetall(k)) for k in keys}


def replay_last_batch(checkpoint: Path) -> dict[str, int]:
    """Make every query of a Spark checkpoint replay its last micro-batch on the next run, as after a
    crash between the batch's writes and its commit: the batch's commit log entry is deleted (its
    offsets stay logged, so Spark runs it again with the same id and the same input).
    Returns query dir -> the batch that will be replayed."""
    replayed: dict[str, int] = {}
    for q in sorted(checkpoint.iterdir()):
        commits = q / "commits"
        if not commits.is_dir():
            continue  # the checkpoint's manifest (deployer/spark/run/checkpoint.py), not a query
        done = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        if done:
            (commits / str(done[-1])).unlink()
            (commits / f".{done[-1]}.crc").unlink(missing_ok=True)
            replayed[q.name] = done[-1]
    return replayed
