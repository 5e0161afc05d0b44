"""A class-data sharing archive for the tests' JVMs: Spark's classes loaded once, mapped by every JVM.

Every JVM the tests start (the session's, and one per `cep run` subprocess: about forty) loads and
verifies the same ~15,000 classes of Spark, Hadoop and their libraries before it does anything; on
a loaded 2-core machine that was a third of a short `cep run`'s wall time. A dynamic CDS archive
(JDK 13+, `-XX:ArchiveClassesAtExit`) keeps those classes as the JVM holds them after loading; a
JVM started with `-XX:SharedArchiveFile` maps them instead (a short `cep run`: 47 s -> 34 s, its
JVM's CPU to a running session about halved, measured beside other Spark jobs).

The archive is made once per virtualenv, JDK and PySpark (its name holds a digest of them), by a
real `cep run` of examples/daily_bill.cpl over a few events, and kept in the virtualenv. It is made
in the background (this file run as a script, under a lock, so that concurrent test processes make
it once): no test waits for it (three Spark test files with the archive removed: 84 s -> 78 s;
on the whole suite the difference is within run-to-run variation), and the JVMs started before it
is ready run without it; `jvm_options` gives it to those started after. A JVM
that cannot use it (another JDK, another class path: the standalone cluster's daemons) ignores it
silently (`-Xshare:auto`, the default, with the CDS log off). Making it never fails the tests: without
it they run as before. Nothing here is used by `cep` itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deployer.spark import hadoop
from deployer.spark.run.jvm_archive import archive_name

ROOT = Path(__file__).resolve().parents[1]
CEP = Path(sys.executable).parent / "cep"
USE = "-XX:SharedArchiveFile={} -Xlog:cds=off,cds+dynamic=off"


def archive_path(base_opts: str) -> Path | None:
    """Where the archive for this virtualenv, JDK, PySpark and JVM options is (made or not): named as
    `cep run`'s own (deployer.spark.run.jvm_archive), with the class path of a local master's JVM
    (the tests' session's and their `cep run`s'), kept in the virtualenv."""
    name = archive_name(base_opts, hadoop.class_path_key("local[2]"))
    return None if name is None else Path(sys.prefix) / "cep-test-jvm" / name


def jvm_options(base_opts: str) -> str:
    """`base_opts` plus the options that map the archive if it is made; else `base_opts` alone, the
    archive being made meanwhile by a process of its own (started here unless one is at it)."""
    path = archive_path(base_opts)
    if path is None:
        return base_opts
    if path.exists():
        return f"{base_opts} {USE.format(path)}"
    if path.with_suffix(".failed").exists():
        return base_opts  # tried once in this virtualenv: no archive, as if none could be made
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return base_opts  # being made
    subprocess.Popen(
        [sys.executable, __file__, str(path), base_opts],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return base_opts


def _make_locked(path: Path, base_opts: str) -> None:
    """The archive made unless it is there, under the lock (a second maker waits, then finds it)."""
    with (path.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            _make(path, base_opts)
        if not path.exists():
            path.with_suffix(".failed").touch()


def _make(path: Path, base_opts: str) -> None:
    """A `cep run` whose JVM writes the archive as it exits; renamed into place once complete."""
    with tempfile.TemporaryDirectory(prefix="cep-jsa-") as tmp:
        work = Path(tmp)
        _inputs(work)
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CEP_")},
            "CEP_DATA_DIR": str(work / "data"),
            "CEP_SHUFFLE_PARTITIONS": "2",
            "SPARK_SUBMIT_OPTS": f"{base_opts} -XX:ArchiveClassesAtExit={partial} -Xlog:cds=off",
            "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false pyspark-shell",
        }
        args = [str(CEP), "run", str(ROOT / "examples" / "daily_bill.cpl"), "--until-idle"]
        args += ["--source", f"cdr1=file:{work / 'cdr1'}", "--source", f"cdr2=file:{work / 'cdr2'}"]
        args += ["--sink", f"priced=file:{work / 'out'}", "--checkpoint", str(work / "ck")]
        args += ["--master", "local[2]"]
        with (work / "run.log").open("wb") as log:
            proc = subprocess.Popen(
                args, env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            ok = proc.wait(600) == 0
            _wait_for_session(proc.pid, 300)  # the JVM writes the archive after the driver exits
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
        if ok and partial.exists() and partial.stat().st_size > 0:
            partial.rename(path)
        else:
            partial.unlink(missing_ok=True)


def _inputs(work: Path) -> None:
    for stream in ("cdr1", "cdr2"):
        (work / stream).mkdir()
        rows = [
            {"idcaller": c, "idreceiver": 9, "duration": 30 + c, "timestamp": f"2026-01-0{d}T0{c}:00:00Z"}
            for d in (1, 2)
            for c in (1, 2, 3)
        ]
        (work / stream / "calls.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (work / "data").mkdir()
    with sqlite3.connect(work / "data" / "crm.sqlite3") as conn:
        conn.execute("CREATE TABLE plans (idcaller integer PRIMARY KEY, idplan integer, fee double)")
        conn.executemany("INSERT INTO plans VALUES (?, ?, ?)", [(c, c, 1.5) for c in (1, 2, 3)])
    conn.close()


def _wait_for_session(sid: int, limit: float) -> None:
    """Until no process of session `sid` is left (Linux /proc), or `limit` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        alive = False
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                    alive |= fields[0] != "Z" and int(fields[3]) == sid
        if not alive:
            return
        time.sleep(0.1)


if __name__ == "__main__":  # jvm_options' background maker: PATH BASE_OPTS
    _make_locked(Path(sys.argv[1]), sys.argv[2])
