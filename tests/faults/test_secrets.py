"""A data store's password never leaves the configuration: not in logs, dead letters, sink output,
Spark checkpoints or the ledger, on either engine; and a run prints its own lines and nothing else.

The test server trusts every local connection, so a URL carrying a sentinel password connects; the
run enriches events (ReadSQL), charges them (UpdateSQL, one refused by a CHECK so its dead letter
carries the database's message and the store's URL) and materializes the result. Then every byte
the run left behind is searched for the password, raw and percent-encoded, Spark's log included.

The run is the real `cep run ... --until-idle` (a subprocess, as `make demo` runs it): its standard
output and error hold only its own lines (`OWN_LINES`): no stack trace, no log line of Spark's
(`ERROR`, `WARN`), no `StackOverflowError` from a stopped query, no `BrokenPipeError` of a Python
worker. On Spark, the log file it names is in the checkpoint and holds Spark's log and what its
Python workers print (the Sequencer's state processor, transformWithStateInPandas, prints as it
starts: the stream has a WATERMARK, so it passes one).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from deployer.settings import Settings

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

SENTINEL = "Sentinel-pw/é:@42"
CEP = Path(sys.executable).parent / "cep"
# Every line a run may print, and nothing else (deployer/runner.py, deployer/spark/engine.py, reporter.py)
OWN_LINES = re.compile(
    r"^(data store crm: postgresql://[^:/@]+:\*\*\*@|spark log: /|progress: |done \((spark|local)\): "
    r"|query \S+: .*; starting it again$)"
)

SCRIPT = """
CREATE STREAMSCHEMA pay WITH id integer, amount integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY owner_of ON crm AS 'SELECT name FROM owners WHERE id = ?' RETURNS (name varchar(20));
CREATE SQLQUERY charge ON crm AS 'UPDATE balances SET amount = amount - ? WHERE id = ?';
CREATE TABLE charges (id integer, name varchar(20), amount integer, n bigint) IN crm;
INSERT INTO named SELECT id, amount, o.name AS name FROM pay ON SQL owner_of, o, id, name;
INSERT INTO charged SELECT id, name, amount, c.n AS n FROM named ON SQL charge, c, amount, id, n;
INSERT INTO TABLE charges SELECT id, name, amount, n FROM charged;
"""


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_the_password_appears_nowhere(engine: str, pg_db: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE owners (id integer PRIMARY KEY, name text)")
        conn.execute("INSERT INTO owners VALUES (1, 'ann'), (2, 'bob')")
        conn.execute("CREATE TABLE balances (id integer PRIMARY KEY, amount integer CHECK (amount >= 0))")
        conn.execute("INSERT INTO balances VALUES (1, 100), (2, 100)")
    user_host = pg_db.split("://", 1)[1]  # postgres@127.0.0.1:port/db
    user, host = user_host.split("@", 1)
    url = f"postgresql://{user}:{quote(SENTINEL, safe='')}@{host}"
    run = tmp_path / "run"
    (run / "in").mkdir(parents=True)
    events = [
        {"id": 1, "amount": 10, "ts": "2026-01-01T00:00:00Z"},
        {"id": 2, "amount": 500, "ts": "2026-01-01T00:00:01Z"},
    ]
    (run / "in" / "part-0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run / "s.cpl").write_text(SCRIPT)
    args = [
        str(CEP),
        "run",
        str(run / "s.cpl"),
        "--engine",
        engine,
        "--source",
        f"pay=file:{run / 'in'}",
        "--sink",
        f"charged=file:{run / 'out'}",
        "--store",
        f"crm={url}",
        "--dead-letter",
        f"file:{run / 'dead'}",
        "--until-idle",
    ]
    if engine == "spark":
        args += ["--checkpoint", str(run / "ck"), "--master", "local[2]"]
    env = {
        **os.environ,
        "CEP_DATA_DIR": str(run / "data"),
        "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false pyspark-shell",
        # a bounded run's JVM options (docs/settings.md): this one makes the JVM print them all
        "CEP_BOUNDED_JVM_OPTIONS": f"{Settings().bounded_jvm_options} -XX:+PrintCommandLineFlags",
    }
    done = subprocess.run(args, env=env, capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log.decode(errors="replace")[-3000:]
    assert b"***" in log  # the URL was shown, redacted
    # the refused charge was dead-lettered with the database's message, which names the store
    dead = b"".join(p.read_bytes() for p in (run / "dead").rglob("*") if p.is_file())
    assert b"balances_amount_check" in dead and b"store crm" in dead
    forms = {SENTINEL, quote(SENTINEL, safe=""), quote(SENTINEL)}
    needles = [f.encode() for f in forms] + [SENTINEL.encode("utf-16-le")]
    leaks = [name for name, data in [("output", log)] if any(n in data for n in needles)]
    files = [p for p in run.rglob("*") if p.is_file() and p.name != "s.cpl"]
    assert len(files) >= 3  # input, sink output, dead letters
    assert engine == "local" or len([p for p in files if "ck" in p.parts]) > 10  # the Spark checkpoint too
    leaks += [str(p) for p in files if any(n in p.read_bytes() for n in needles)]
    with psycopg.connect(pg_db) as conn:
        ledger = str(conn.execute("SELECT * FROM cep_ledger").fetchall()) if engine == "spark" else ""
    leaks += ["cep_ledger"] if any(f in ledger for f in forms) else []
    assert leaks == []

    output = log.decode(errors="replace")
    assert [line for line in output.splitlines() if not OWN_LINES.match(line)] == [], output[-3000:]
    for noise in ("Traceback", "Exception", "ERROR", "WARN", "StackOverflowError", "BrokenPipeError"):
        assert noise not in output, output[-3000:]
    if engine == "spark":
        logs = [line.split(": ", 1)[1] for line in output.splitlines() if line.startswith("spark log: ")]
        assert len(logs) == 1 and Path(logs[0]).parent == run / "ck" / "logs", output
        spark_log = Path(logs[0]).read_text(errors="replace")
        assert "Using Spark's default log4j profile" in spark_log, spark_log[-3000:]  # log4j's console
        assert re.search(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO) ", spark_log, re.M), spark_log[-3000:]
        # what a Python worker prints passes through the JVM, into the file
        assert "TransformWithStateInPandas Python worker" in spark_log, spark_log[-3000:]
        # the JVM of a bounded run got CEP_BOUNDED_JVM_OPTIONS, which the JVM printed into the file
        flags = next(line for line in spark_log.splitlines() if "-XX:+PrintCommandLineFlags" in line)
        assert "-XX:TieredStopAtLevel=1" in flags and "-XX:+UseSerialGC" in flags, flags
