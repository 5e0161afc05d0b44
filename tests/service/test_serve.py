"""`cep serve` as a process: runs deployments from a PostgreSQL catalog, reports progress and
failures, reacts to `cep stop`/`cep start` through NOTIFY, survives SIGKILL without losing or
doubling output, and stops cleanly on SIGTERM.

One test on purpose: each service pays a JVM start (~6-8 s) and the first micro-batch (~5 s).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from service_helpers import ok, wait_for, write_script

from deployer.service.catalog import Catalog

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

GOOD = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer;
INSERT INTO priced SELECT id, caller, duration * 2 AS cost FROM calls WHERE duration >= 10;
"""
# Fails at run time, once events arrive: the table it reads does not exist.
BAD = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer;
CREATE DATASTORE crm TYPE sqlite;
CREATE SQLQUERY plan_of ON crm AS 'SELECT fee FROM plans WHERE idcaller = ?' RETURNS (fee double);
INSERT INTO priced SELECT id, p.fee AS fee FROM calls ON SQL plan_of, p, caller, fee;
"""


def write_calls(directory: Path, first: int, count: int, per_file: int = 50) -> list[dict[str, Any]]:
    """JSON-lines files of calls `first`.., each file renamed into place whole."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i, "caller": i % 7, "duration": i % 30} for i in range(first, first + count)]
    for start in range(0, count, per_file):
        name = f"calls-{first + start:06d}.jsonl"
        tmp = directory / f".{name}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows[start : start + per_file]))
        tmp.rename(directory / name)
    return rows


def expected(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"id": r["id"], "caller": r["caller"], "cost": r["duration"] * 2} for r in rows if r["duration"] >= 10
    ]


def written(directory: Path) -> list[dict[str, Any]]:
    if not directory.is_dir():
        return []
    out = []
    for f in sorted(directory.iterdir()):
        if f.is_file() and not f.name.startswith(("_", ".")):
            out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return out


def has_rows(directory: Path, n: int) -> Callable[[], bool]:
    return lambda: len(written(directory)) >= n


def serve(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    # --poll 30: anything quicker than that came through LISTEN/NOTIFY.
    args = [sys.executable, "-m", "deployer.cli", "serve", "--master", "local[2]", "--poll", "30"]
    with log.open("ab") as f:
        return subprocess.Popen(args, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def row(catalog: str, name: str) -> Any:
    cat = Catalog.open(catalog)
    try:
        return cat.get(name)
    finally:
        cat.close()


def deploy_good(tmp_path: Path, inp: Path, out: Path, rules: list[str], version: int = 1) -> list[str]:
    """`cep deploy` of GOOD, with a stateless sink of the calls' ids for each of `rules` (RULES)."""
    added = "".join(f"INSERT INTO {sink} SELECT id FROM calls WHERE {RULES[sink][0]};\n" for sink in rules)
    script = write_script(tmp_path, GOOD + added, f"good-{version}.cpl")
    args = [
        "deploy",
        script,
        "--name",
        "good",
        "--source",
        f"calls=file:{inp}",
        "--sink",
        f"priced=file:{out}",
    ]
    return args + [f"--sink={sink}=file:{tmp_path / sink}" for sink in rules]


# Rules added to GOOD's deployment as it runs: sink -> its condition in CPL, and in Python.
RULES: dict[str, tuple[str, Callable[[dict[str, Any]], bool]]] = {
    "free": ("duration < 10", lambda r: r["duration"] < 10),
    "long": ("duration >= 20", lambda r: r["duration"] >= 20),
    "odd": ("id % 2 = 1", lambda r: r["id"] % 2 == 1),
    "even": ("id % 2 = 0", lambda r: r["id"] % 2 == 0),
}


def test_serve_runs_reports_resumes_and_stops(pg_db: str, tmp_path: Path, data_dir: Path) -> None:
    env = {
        **os.environ,
        "CEP_CATALOG_URL": pg_db,
        "CEP_DATA_DIR": str(data_dir),
        "CEP_SHUFFLE_PARTITIONS": "2",
        "CEP_RESTART_BASE_S": "3",
        "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false pyspark-shell",
    }
    log = tmp_path / "serve.log"
    inp, out = tmp_path / "in", tmp_path / "out"
    rows = write_calls(inp, 0, 200)
    ok("db", "upgrade", catalog=pg_db)
    rules: list[str] = []
    ok(*deploy_good(tmp_path, inp, out, rules), catalog=pg_db)
    ok(
        "deploy",
        write_script(tmp_path, BAD, "bad.cpl"),
        "--name",
        "bad",
        "--source",
        f"calls=file:{inp}",
        "--sink",
        f"priced=file:{tmp_path / 'bad-out'}",
        "--store",
        f"crm=sqlite:///{tmp_path / 'crm.sqlite3'}",
        catalog=pg_db,
    )

    procs = [serve(env, log)]
    try:
        first = expected(rows)
        wait_for("good's first output", lambda: (r := row(pg_db, "good")) and r.events_out == len(first))
        text = ok("status", "good", catalog=pg_db)
        assert "state:      running (desired: running)" in text
        assert "events in:  200" in text and f"events out: {len(first)}" in text, text
        assert f"service:    {socket.gethostname()}:{procs[0].pid}, seen" in text
        assert "seen" in ok("serve", "--check", catalog=pg_db)
        # The failing deployment reports its cause; the other one runs on regardless.
        bad = wait_for("bad's error", lambda: (r := row(pg_db, "bad")) and r.last_error and r)
        assert "StoreQueryError: store crm" in bad.last_error and "no such table: plans" in bad.last_error
        assert "no such table: plans" in ok("status", "bad", catalog=pg_db)
        wait_for("a restart of bad", lambda: row(pg_db, "bad").restarts >= 1)
        assert row(pg_db, "good").actual_state == "running"

        # Kill the service while new input is being read; a new one resumes from the checkpoints.
        rows += write_calls(inp, 200, 200)
        wait_for("good to see more input", lambda: row(pg_db, "good").events_in > 200, every=0.1)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(30)
        rows += write_calls(inp, 400, 100)
        procs.append(serve(env, log))
        want = expected(rows)
        wait_for("all output", lambda: len(written(out)) >= len(want))
        assert Counter(json.dumps(r, sort_keys=True) for r in written(out)) == Counter(
            json.dumps(r, sort_keys=True) for r in want
        ), "output rows lost or doubled across the SIGKILL"
        good = wait_for("good's counters", lambda: (r := row(pg_db, "good")) and r.events_in == 500 and r)
        # A batch that completed in the last second before the kill may be missing from the counters,
        # never counted twice.
        assert len(first) <= good.events_out <= len(want)

        # stop/start reach the service through NOTIFY (it polls only every 30 s).
        ok("stop", "good", catalog=pg_db)
        wait_for("good stopped", lambda: row(pg_db, "good").actual_state == "stopped", timeout=15)
        ok("start", "good", catalog=pg_db)
        wait_for("good running again", lambda: row(pg_db, "good").actual_state == "running", timeout=30)

        # Rules added to the running deployment: two new stateless sinks beside `priced`, which keeps
        # its query, share one that reads the input from the beginning; two more next to those, once
        # that query has gone on, share a query of the next generation. Every sink gets every row
        # once (deployer.spark.run.stateless_groups).
        for version, added in enumerate([["free", "long"], ["odd", "even"]], start=2):
            rules += added
            redeployed = ok(*deploy_good(tmp_path, inp, out, rules, version), catalog=pg_db)
            assert redeployed.strip() == (
                "redeployed good; it resumes from its checkpoint, and its new outputs read their inputs "
                f"from the beginning: sink '{added[0]}', sink '{added[1]}'"
            )
            for sink in rules:
                wanted = [r["id"] for r in rows if RULES[sink][1](r)]
                wait_for(f"{sink}'s rows", has_rows(tmp_path / sink, len(wanted)))
                assert sorted(r["id"] for r in written(tmp_path / sink)) == wanted, sink
            assert Counter(json.dumps(r, sort_keys=True) for r in written(out)) == Counter(
                json.dumps(r, sort_keys=True) for r in want
            ), "priced's rows written again after a redeploy"
        record = json.loads(next(data_dir.rglob("shared-queries.json")).read_text())
        assert record["queries"] == {
            "sinks:stateless": ["free", "long"],
            "sinks:stateless~2": ["even", "odd"],
        }

        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(60) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)
    text = log.read_text(errors="replace")
    assert "good: running" in text and "SIGTERM: stopping" in text
    assert row(pg_db, "good").actual_state == "pending"  # nothing runs it until a service starts
    cat = Catalog.open(pg_db)
    try:
        # The killed service could not sign off; the one stopped with SIGTERM did.
        last = cat.last_service()
        assert last is not None and last.instance.endswith(f":{procs[0].pid}")
        events = [h.event for h in cat.history("good")]
    finally:
        cat.close()
    assert events[:3] == ["deployed", "starting", "running"]
    assert events[-3:] == ["starting", "running", "service-stopped"]
    assert "stopped" in events
