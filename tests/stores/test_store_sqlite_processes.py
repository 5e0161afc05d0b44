"""An SQLite store shared by processes: every writer waits for the database's lock, none fails.

Spark's Python workers, `cep serve`'s deployments and a `cep run` beside them each open the same
SQLite file in processes of their own. Here real processes, started together, each open fresh
databases at the same moment and write to them (the ledger, a materialized table, an UpdateSQL) and
read them back: each must succeed, whoever holds the lock when it arrives, and every write must be
there once; and each reads a table missing from a new database, which must fail saying so. Before
the store waited for the lock, some of them failed with `database is locked` (switching a new
database to WAL) or `table ... already exists` (two transactions that checked for the table, found
none and created it).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

PROCESSES, DATABASES, ROWS = 3, 8, 20

WORKER = r"""
import json, sys, time
from pathlib import Path
from operators.datatypes import T_INTEGER, schema_of
from operators.graph import SqlQuery, Table
from operators.sqltext import analyze
from stores.sql.store import SqlStore
from stores.urls import StoreURL

me, directory, databases, rows = int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
table = Table("calls", "crm", schema_of(("worker", T_INTEGER), ("n", T_INTEGER)), ())

def query(text, name):
    info = analyze(text)
    return SqlQuery(name, "crm", text, info.kind, len(info.params), None)

count = query("UPDATE counters SET n = n + ? WHERE worker = ?", "count")
seen = query("SELECT count(*) FROM calls WHERE worker = ?", "seen")
plan_of = query("SELECT fee FROM plans WHERE caller = ?", "plan_of")
(directory / f"ready-{me}").touch()
go = directory / "go"
while not go.exists():
    time.sleep(0.001)
errors = []
for d in range(databases):
    # as `cep serve`'s failing deployment: a new database, its table missing
    fresh = SqlStore(StoreURL("sqlite", database=str(directory / f"new-{d}.sqlite3")), "crm")
    try:
        fresh.read(plan_of, [(me,)])
        errors.append(f"new database {d}: read a missing table")
    except Exception as err:
        if "no such table: plans" not in str(err):
            errors.append(f"new database {d}: {err}")
    finally:
        fresh.close()
    store = SqlStore(StoreURL("sqlite", database=str(directory / f"shared-{d}.sqlite3")), "crm")
    try:
        store.materialize(table, ["worker", "n"], [(me, i) for i in range(rows)], ledger_key=("t", "m", me))
        store.update(count, [(1, me)] * rows, event_ids=[f"{me}:{i}" for i in range(rows)], scope="t/u")
        assert store.read(seen, [(me,)]) == [[(rows,)]]
    except Exception as err:
        errors.append(f"database {d}: {err}")
    finally:
        store.close()
print(json.dumps(errors))
"""


def test_processes_writing_one_sqlite_store_at_once_all_succeed(tmp_path: Path) -> None:
    for d in range(DATABASES):  # the table the UpdateSQL changes; the store makes the others itself
        with sqlite3.connect(tmp_path / f"shared-{d}.sqlite3") as conn:
            conn.execute("CREATE TABLE counters (worker integer PRIMARY KEY, n integer NOT NULL)")
            conn.executemany("INSERT INTO counters VALUES (?, 0)", [(p,) for p in range(PROCESSES)])
        conn.close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(p), str(tmp_path), str(DATABASES), str(ROWS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(PROCESSES)
    ]
    # every worker at the start line (its imports done), then all at once
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{p}").exists() for p in range(PROCESSES)):
        assert all(proc.poll() is None for proc in procs), [proc.communicate() for proc in procs]
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    failures = []
    for p, proc in enumerate(procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"worker {p} crashed:\n{err[-3000:]}"
        failures += [f"worker {p}, {e}" for e in json.loads(out.strip().splitlines()[-1])]
    assert not failures, "\n".join(failures)
    for d in range(DATABASES):
        with sqlite3.connect(tmp_path / f"shared-{d}.sqlite3") as conn:
            per_worker = conn.execute("SELECT worker, count(*) FROM calls GROUP BY worker").fetchall()
            counters = conn.execute("SELECT worker, n FROM counters ORDER BY worker").fetchall()
            ledger = conn.execute("SELECT count(*) FROM cep_ledger").fetchone()
            mode = conn.execute("PRAGMA journal_mode").fetchone()
        conn.close()
        assert sorted(per_worker) == [(p, ROWS) for p in range(PROCESSES)], (d, per_worker)
        assert counters == [(p, ROWS) for p in range(PROCESSES)], (d, counters)
        assert ledger == (PROCESSES * (ROWS + 1),), (d, ledger)  # a batch and ROWS events each
        assert mode == ("wal",)


READER = r"""
import sys, time
from pathlib import Path
from operators.graph import SqlQuery
from operators.sqltext import analyze
from stores.sql.store import SqlStore
from stores.urls import StoreURL

path, started = sys.argv[1], Path(sys.argv[2])
text = "SELECT fee FROM plans WHERE caller = ?"
info = analyze(text)
store = SqlStore(StoreURL("sqlite", database=path), "crm")
started.write_text(repr(time.time()))
try:
    store.read(SqlQuery("plan_of", "crm", text, info.kind, len(info.params), None), [(1,)])
    print("read a missing table")
except Exception as err:
    print(err)
finally:
    store.close()
"""


def test_a_store_opened_while_another_process_holds_the_database_waits_for_it(tmp_path: Path) -> None:
    """As `cep serve`'s failing deployment: its store, a new database, opened by one process while
    another writes to it. The store waits (SQLite refuses the switch to WAL at once while another
    connection writes), then fails for the reason there is (`no such table`)."""
    path, started = tmp_path / "crm.sqlite3", tmp_path / "started"
    holder = sqlite3.connect(path, isolation_level=None)  # a new database: not in WAL mode yet
    holder.execute("CREATE TABLE other (x integer)")
    holder.execute("BEGIN IMMEDIATE")  # a writer in the middle of its transaction
    holder.execute("INSERT INTO other VALUES (1)")
    proc = subprocess.Popen(
        [sys.executable, "-c", READER, str(path), str(started)], stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        time.sleep(0.3)  # the reader meets the lock
        released = time.time()
        holder.execute("ROLLBACK")
        out, _ = proc.communicate(timeout=60)
    finally:
        holder.close()
        proc.kill()
    assert float(started.read_text()) < released  # it tried while the lock was held
    assert "no such table: plans" in out, out
