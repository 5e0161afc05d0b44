"""Graceful stop and restart in the middle of a stream.

`cep run` (Spark, no --until-idle: it watches its input for ever) materializes calls into Postgres
while input files keep arriving, at most one file per micro-batch so that a backlog builds up. In
the middle of the stream it gets SIGTERM, as a service manager sends it: it must let its batches
in progress finish and begin no other (a batch the checkpoint has not committed has written nothing
to Postgres), say how to resume, exit 0, and leave no process behind. Then a second run gets
SIGINT on its process group, as Ctrl-C in a terminal sends it, and must stop the same way with exit
code 130. More files arrive, and a last run with the same --checkpoint and --until-idle finishes the
stream. The tables must then equal what the reference executor (`--engine local`) writes from the
whole input into a database of its own: no row doubled, none lost, every hourly total right.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from fault_helpers import (
    CALLS_SCRIPT,
    Feeder,
    generate,
    in_flight,
    kill_all,
    ledger,
    reference_run,
    rows,
    run_env,
    run_to_end,
    session_members,
    start,
    tail,
)

from cpl.compiler import compile_script
from operators import graph as g

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

FILES, PER_FILE = 15, 40
# signal, expected exit code, files fed by then. SIGTERM comes once the run has committed batches;
# SIGINT as soon as its queries run (waiting for a commit again would only make the test longer).
STOPS = [(signal.SIGTERM, 0, 5), (signal.SIGINT, 130, 10)]


def stop_mid_stream(
    args: list[str],
    env: dict[str, str],
    tmp_path: Path,
    log: Path,
    feeder: Feeder,
    files: list[list[dict]],
    until: int,
    sig: int,
    db: str,
) -> tuple[int, float, str]:
    """Start a watching run; once it has committed a batch (SIGTERM) or runs its queries (SIGINT),
    feed a file every 0.3 s up to `until` files, then send `sig` (SIGINT to the process group, as a
    terminal does; SIGTERM to the driver, as a service manager does). Its exit code, how long it
    took to stop, and what it printed."""
    before = log.stat().st_size if log.exists() else 0
    proc = start(args, env, tmp_path, log)
    try:
        with psycopg.connect(db, autocommit=True) as conn:
            committed = len(ledger(conn))
            t0 = time.monotonic()
            while (
                len(ledger(conn)) == committed
                if sig == signal.SIGTERM
                else "progress:" not in log.read_text(errors="replace")[before:]
            ):
                assert proc.poll() is None, f"the run ended on its own:\n{tail(log)}"
                assert time.monotonic() - t0 < 180, f"nothing happened in 180 s:\n{tail(log)}"
                time.sleep(0.05)
        # a watching run's JVM has the long-lived run's options (docs/settings.md)
        jvms = java_command_lines(proc.pid)
        assert any(all(o in jvm.split() for o in LONG_RUN_OPTIONS) for jvm in jvms), jvms
        while feeder.written < until:
            feeder.add([files[feeder.written]])
            time.sleep(0.3)
        assert proc.poll() is None, f"the run ended on its own:\n{tail(log)}"
        asked = time.monotonic()
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        code = proc.wait(90)
        took = time.monotonic() - asked
        # a graceful exit leaves nothing running: the JVM and the Python workers are gone too
        deadline = time.monotonic() + 30
        while (left := session_members(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"processes left after the stop: {left}"
    finally:
        kill_all(proc)
    return code, took, log.read_text(errors="replace")[before:]


# CEP_LONG_JVM_OPTIONS' default: the C library's and the heap's free memory given back, cold
# compiled code flushed from a smaller cache
LONG_RUN_OPTIONS = (
    "-XX:TrimNativeHeapInterval=5000",
    "-XX:MaxHeapFreeRatio=40",
    "-XX:G1PeriodicGCInterval=30000",
    "-XX:ReservedCodeCacheSize=100m",
)


def java_command_lines(sid: int) -> list[str]:
    """The command lines of the JVMs among session `sid`'s processes."""
    lines = []
    for pid in session_members(sid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode(errors="replace")).name == "java":
            lines.append(" ".join(a.decode(errors="replace") for a in argv))
    return lines


def test_stop_on_sigterm_and_ctrl_c_then_resume(pg_db: str, pg_reference_db: str, tmp_path: Path) -> None:
    files = generate(random.Random(1), files=FILES, per_file=PER_FILE, callers=4)
    script = tmp_path / "calls.cpl"
    script.write_text(CALLS_SCRIPT, encoding="utf-8")
    feeder = Feeder(tmp_path / "in")
    log = tmp_path / "spark.log"
    # Long enough for any batch here: a stop then never cuts one short (that is not what is tested).
    env = run_env(tmp_path, CEP_STOP_TIMEOUT="60")
    graph = compile_script(CALLS_SCRIPT).graph
    tables = {f"table_{n.table.name}": n.id for n in graph.nodes if isinstance(n, g.Materialize)}
    checkpoint = tmp_path / "checkpoint"
    common = [str(script), "--source", f"calls=file:{feeder.directory}"]
    args = [
        *common,
        "--store",
        f"crm={pg_db}",
        "--checkpoint",
        str(checkpoint),
        "--dead-letter",
        f"file:{tmp_path / 'spark-dead'}",
        "--master",
        "local[2]",
    ]
    one_file_at_a_time = ["--max-files-per-trigger", "1"]  # a backlog, so that a stop cuts into it
    priced = [e for f in files for e in f if e["duration"] >= 10]

    feeder.add(files[:2])
    seen = []
    for sig, expected, until in STOPS:
        code, took, output = stop_mid_stream(
            [*args, *one_file_at_a_time], env, tmp_path, log, feeder, files, until, sig, pg_db
        )
        name = signal.Signals(sig).name
        assert code == expected, f"{name}: exit code {code}\n{output[-3000:]}"
        assert "stopping: letting the micro-batches in progress finish" in output, output[-3000:]
        last = output.strip().splitlines()[-1]
        assert last.startswith("stopped (spark): ") and last.endswith(
            "; run the same command with the same --checkpoint to resume"
        ), output[-3000:]
        assert "error:" not in output and "Traceback" not in output, output[-3000:]
        assert took < 60, f"{name}: the run took {took:.0f} s to stop"
        # No batch was cut in the middle of its writes: a batch not committed in the checkpoint (its
        # next one, begun as the stop came) has written nothing, so no ledger row of it is in Postgres.
        with psycopg.connect(pg_db) as conn:
            entries = ledger(conn)
        for query, batch in in_flight(checkpoint).items():
            if query in tables:
                assert (tables[query], f"batch:{batch}") not in entries, (name, query, batch)
        stored = len(rows(pg_db, "SELECT id FROM call_log"))
        seen.append(stored)
        # mid-stream: some calls are stored, the rest of the stream is still to come
        assert 0 < stored < len(priced), (name, stored)
    assert seen[0] <= seen[1]

    feeder.add(files[feeder.written :])
    code, _, output = run_to_end([*args, "--until-idle"], env, tmp_path, log)
    assert code == 0 and "done (spark)" in output, output[-3000:]

    reference_run(script, [f"calls=file:{feeder.directory}"], [f"crm={pg_reference_db}"], tmp_path)

    log_query = "SELECT id, caller, cost, ts FROM call_log"
    reference, spark = Counter(rows(pg_reference_db, log_query)), Counter(rows(pg_db, log_query))
    assert sorted(r[0] for r in reference.elements()) == sorted(
        e["id"] for e in priced
    )  # the oracle is right
    doubled = [r for r, n in spark.items() if n > 1]
    assert not doubled, f"{len(doubled)} rows written twice, e.g. {doubled[:3]}"
    assert spark == reference, (
        f"lost {sorted((reference - spark).elements())[:3]}, unexpected {sorted((spark - reference).elements())[:3]}"
    )
    bill_query = "SELECT caller, hour, total, calls FROM hourly_bill"
    reference_bill = {(c, h): (t, n) for c, h, t, n in rows(pg_reference_db, bill_query)}
    spark_bill = {(c, h): (t, n) for c, h, t, n in rows(pg_db, bill_query)}
    assert len(reference_bill) >= 10
    assert spark_bill == reference_bill
    # every call is valid and every row was accepted: neither run dead-lettered anything
    for dead in (tmp_path / "spark-dead", tmp_path / "ref-dead"):
        assert not [p for p in dead.rglob("*") if p.is_file() and p.stat().st_size], dead
