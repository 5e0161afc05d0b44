"""`cep serve`: one Spark application that runs every deployment of the catalog that should run.

The loop, every second: take progress and failures from the running queries and write them to the
catalog; and, every `--poll` seconds or at once when the catalog says something changed (NOTIFY on
PostgreSQL, see migrations/versions/0001_catalog.py), reconcile: start what should run and does
not, stop what should not run, restart what was redeployed (its `revision` changed), forget what
was undeployed and delete checkpoints that no deployment refers to any more.

Each deployment is a `SparkDeployment` of its own (its own streaming queries, its own checkpoint
directory `$CEP_DATA_DIR/<checkpoint>`), started without blocking. A failed query stops only its
own deployment, which is restarted from its checkpoint after 2, 4, 8, ... seconds (at most
`CEP_RESTART_MAX_S`, 120 by default); the count starts over once it has run for a minute. When the
service itself restarts, every deployment whose desired state is running resumes from its
checkpoint: file sinks write one file per batch id, so a batch replayed after a crash replaces its
own output instead of doubling it.
Counters: deployer.service.reports.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deployer import settings
from deployer.runner import bind_stores, compile_bound
from deployer.service.catalog import NOTIFY_CHANNEL, Catalog, CatalogError, data_dir, now
from deployer.service.models import Deployment
from deployer.service.reports import absorb, redact, summarize_error, totals
from deployer.service.spark_runs import ServiceDeployment
from deployer.spark.run.reclaim import collect
from deployer.spark.run.session import set_log_level, spark_session

log = logging.getLogger("paascep.service")

TICK_S = 1.0
HEALTHY_AFTER_S = 60.0
INCARNATION = re.compile(r"^\d{14}-[0-9a-f]{6}$")
SERVICE_LOCK = 0x63657073  # pg_try_advisory_lock key: "ceps"


@dataclass
class Running:
    name: str
    revision: int
    checkpoint: str
    deployment: Any
    started: float
    progress: dict[str, Any] = field(default_factory=dict)


@dataclass
class Backoff:
    revision: int
    failures: int
    next_at: float


class Service:
    def __init__(self, catalog: Catalog, master: str | None = None, poll: float = 2.0):
        self.catalog = catalog
        self.master = master
        self.poll = poll
        self.data_dir = data_dir().resolve()
        self.running: dict[str, Running] = {}
        self.backoff: dict[str, Backoff] = {}
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.instance = f"{socket.gethostname()}:{os.getpid()}"
        self.started_at = now()
        self.spark: Any = None
        self.settings = settings.current()
        self._log_level = self.settings.spark_log_level
        self._lock: Any = None

    # -- main loop --------------------------------------------------------------------------------

    def run(self) -> int:
        if not log.handlers:  # our messages only: py4j logs every callback at INFO
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s cep serve: %(message)s"))
            log.addHandler(handler)
            log.setLevel(logging.INFO)
            log.propagate = False
        self._take_catalog()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        log.info(
            "catalog %s, data %s, master %s", self.catalog.shown, self.data_dir, self.master or "local[*]"
        )
        next_reconcile = next_beat = 0.0
        try:
            self.catalog.heartbeat(self.instance, self.started_at, self.master)
            self.spark = spark_session(self.master, app="paascep-service")
            if self.catalog.kind == "postgresql":
                threading.Thread(target=self._listen, name="cep-listen", daemon=True).start()
            while not self.stopping.is_set():
                t = time.monotonic()
                if self.wake.is_set() or t >= next_reconcile:
                    self.wake.clear()
                    self._guard(self.reconcile)
                    next_reconcile = t + self.poll
                    due = [b.next_at for b in self.backoff.values()]
                    next_reconcile = min([next_reconcile, *due])
                self._guard(self.monitor)
                if t >= next_beat:
                    self._guard(lambda: self.catalog.heartbeat(self.instance, self.started_at, self.master))
                    next_beat = t + self.poll
                self.wake.wait(timeout=max(0.05, min(TICK_S, next_reconcile - time.monotonic())))
        finally:
            self.shutdown()
        return 0

    def _take_catalog(self) -> None:
        """One service per catalog: two would run every deployment twice, on one checkpoint. The lock
        (a PostgreSQL session lock, an flock beside a SQLite catalog) dies with the process, even
        with SIGKILL, so a restarted service takes it over at once."""
        if self.catalog.kind == "postgresql":
            import psycopg

            conn = psycopg.connect(self.catalog.url.libpq_conninfo(), autocommit=True)
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (SERVICE_LOCK,)).fetchone()
            if not (row and row[0]):
                conn.close()
                raise CatalogError(self._busy())
            self._lock = conn
            return
        import fcntl

        f = open(f"{self.catalog.url.database}.serve-lock", "a")  # noqa: SIM115 (held until exit)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise CatalogError(self._busy()) from None
        self._lock = f

    def _busy(self) -> str:
        other = self.catalog.last_service()
        who = f" ({other.instance}, seen {other.seen_at:%Y-%m-%d %H:%M:%S})" if other else ""
        return f"another cep serve{who} is serving the catalog at {self.catalog.shown}: stop it first"

    def _on_signal(self, signum: int, _frame: Any) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        self.stopping.set()
        self.wake.set()

    def _guard(self, step: Any) -> None:
        """A step that fails (the catalog unreachable for a moment...) is retried next time round;
        it must not take the running deployments down with it."""
        try:
            step()
        except Exception as err:
            log.error("%s", summarize_error(err))

    def _listen(self) -> None:
        """Wake the loop on every NOTIFY from the catalog (PostgreSQL)."""
        import psycopg

        while not self.stopping.is_set():
            try:
                with psycopg.connect(self.catalog.url.libpq_conninfo(), autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.wake.set()  # whatever changed while nobody listened
                    while not self.stopping.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self.wake.set()
            except Exception as err:
                log.warning(
                    "listening to the catalog: %s; polling every %s s meanwhile", redact(str(err)), self.poll
                )
                self.stopping.wait(5.0)

    def shutdown(self) -> None:
        for name in list(self.running):
            run = self.running.pop(name)
            self._stop_queries(run)
            with contextlib.suppress(Exception):
                self.catalog.update(name, "service-stopped", None, actual_state="pending")
        with contextlib.suppress(Exception):
            self.catalog.forget_service(self.instance)
        if self.spark is not None:
            with contextlib.suppress(Exception):
                self.spark.stop()
        with contextlib.suppress(Exception):
            self._lock.close()
        log.info("stopped")

    # -- reconcile: the catalog's wishes -> what runs ---------------------------------------------

    def reconcile(self) -> None:
        rows = {r.name: r for r in self.catalog.deployments()}
        for name in [n for n in self.running if n not in rows]:
            log.info("%s: undeployed", name)
            self._stop_queries(self.running.pop(name))
        for name in [n for n in self.backoff if n not in rows]:
            del self.backoff[name]
        for name, row in rows.items():
            run = self.running.get(name)
            if row.desired_state == "stopped":
                self.backoff.pop(name, None)
                if run is not None:
                    self._stop_queries(self.running.pop(name))
                    self.catalog.update(name, "stopped", None, actual_state="stopped")
                    log.info("%s: stopped", name)
                elif row.actual_state != "stopped":
                    self.catalog.update(name, "stopped", None, actual_state="stopped")
                continue
            if run is not None:
                if run.revision == row.revision:
                    continue
                log.info("%s: revision %s -> %s, restarting", name, run.revision, row.revision)
                self._stop_queries(self.running.pop(name))
            b = self.backoff.get(name)
            if b is not None and b.revision == row.revision and time.monotonic() < b.next_at:
                continue
            if b is not None and b.revision != row.revision:
                del self.backoff[name]  # redeployed or started by hand: try now, count afresh
                b = None
            self._start(row, b)
        self._collect_checkpoints(rows)

    def checkpoint_path(self, location: str) -> Path:
        p = Path(location)
        return p if p.is_absolute() else self.data_dir / p

    def _start(self, row: Deployment, backoff: Backoff | None) -> None:
        name = row.name
        restarts = row.restarts + (1 if backoff is not None else 0)
        detail = f"revision {row.revision}" + (f", restart {restarts} after a failure" if backoff else "")
        self.catalog.update(name, "starting", detail, actual_state="starting", restarts=restarts)
        deployment = None
        try:
            b = row.bindings
            stores = dict(b.get("stores") or {})
            # with its stores bound, which give the result types of its SELECTs (cpl.describe)
            compiled = compile_bound(row.script, f"<{name}>", stores)
            for w in compiled.warnings:
                log.warning("%s: %s", name, w.render(row.script, f"<{name}>"))
            graph = compiled.graph
            config = bind_stores(graph, stores)
            checkpoint = self.checkpoint_path(row.checkpoint)
            checkpoint.mkdir(parents=True, exist_ok=True)
            # The incarnation is part of the name the ledger knows the deployment by: a reset
            # state (a new checkpoint, batch ids from 0 again) must not be taken for a replay.
            deployment = ServiceDeployment(
                self.spark,
                graph,
                dict(b.get("sources") or {}),
                dict(b.get("sinks") or {}),
                str(checkpoint),
                b.get("dead_letter"),
                config,
                False,
                name=f"{name}@{Path(row.checkpoint).name}",
            )
            deployment.start()
        except Exception as err:
            if deployment is not None:
                self._stop_queries(Running(name, row.revision, row.checkpoint, deployment, 0.0))
            self._failed(name, row.revision, summarize_error(err), backoff)
            return
        queries = {self._short(q.name) for q in deployment.queries}
        progress = {k: v for k, v in (row.progress or {}).items() if k in queries}
        self.running[name] = Running(
            name, row.revision, row.checkpoint, deployment, time.monotonic(), progress
        )
        self.catalog.update(name, "running", f"{len(queries)} queries", actual_state="running")
        log.info("%s: running (%d queries, checkpoint %s)", name, len(queries), row.checkpoint)

    def _failed(self, name: str, revision: int, error: str, backoff: Backoff | None) -> None:
        failures = (backoff.failures if backoff else 0) + 1
        delay = min(self.settings.restart_max_s, self.settings.restart_base_s * 2 ** (failures - 1))
        self.backoff[name] = Backoff(revision, failures, time.monotonic() + delay)
        t = now()
        self.catalog.update(
            name,
            "failed",
            f"{error} (retry in {delay:.0f} s)",
            actual_state="failed",
            last_error=error,
            last_error_at=t,
        )
        log.error("%s: failed, retrying in %.0f s: %s", name, delay, error)

    @staticmethod
    def _short(query_name: str | None) -> str:
        return (query_name or "").split(":", 1)[-1]

    def _stop_queries(self, run: Running) -> None:
        """Stop one deployment's queries; Spark logs the cancelled jobs as errors, so hush it."""
        if self.spark is not None:
            set_log_level(self.spark, "OFF")
        try:
            run.deployment.stop()
        except Exception as err:
            log.warning("%s: stopping: %s", run.name, summarize_error(err))
        finally:
            if self.spark is not None:
                set_log_level(self.spark, self._log_level)
            collect()  # the deployments stopped before, in Python and so in the JVM

    # -- monitor: what runs -> the catalog --------------------------------------------------------

    def monitor(self) -> None:
        for name, run in list(self.running.items()):
            failure = None
            changed = False
            for q in run.deployment.queries:
                key = self._short(q.name)
                try:
                    recent = run.deployment.reports(q)
                    changed |= absorb(run.progress.setdefault(key, {}), recent)
                except Exception as err:  # the counters may lag; the query is not at fault
                    log.warning("%s: progress of %s: %s", name, key, summarize_error(err))
                try:
                    exc = q.exception()
                    if exc is not None:
                        failure = f"query {key}: {summarize_error(exc)}"
                    elif not q.isActive:
                        failure = f"query {key} stopped unexpectedly"
                except Exception as err:
                    failure = f"query {key}: {summarize_error(err)}"
                if failure:
                    break
            if changed:
                self.catalog.update(name, progress=dict(run.progress), **totals(run.progress))
            if failure is None:
                b = self.backoff.get(name)
                if b is not None and time.monotonic() - run.started > HEALTHY_AFTER_S:
                    del self.backoff[name]
                continue
            del self.running[name]
            self._stop_queries(run)
            self._failed(name, run.revision, failure, self.backoff.get(name))

    # -- checkpoints nobody refers to -------------------------------------------------------------

    def _collect_checkpoints(self, rows: dict[str, Deployment]) -> None:
        root = self.data_dir / "checkpoints"
        if not root.is_dir():
            return
        keep = {self.checkpoint_path(r.checkpoint).resolve() for r in rows.values()}
        keep |= {self.checkpoint_path(r.checkpoint).resolve() for r in self.running.values()}
        for name_dir in root.iterdir():
            if not name_dir.is_dir():
                continue
            for inc in name_dir.iterdir():
                if inc.is_dir() and INCARNATION.match(inc.name) and inc.resolve() not in keep:
                    shutil.rmtree(inc, ignore_errors=True)
                    log.info("%s: deleted checkpoint %s", name_dir.name, inc)
                    with contextlib.suppress(Exception):
                        self.catalog.update(
                            name_dir.name, "checkpoint-deleted", str(inc.relative_to(self.data_dir))
                        )
            with contextlib.suppress(OSError):
                name_dir.rmdir()  # only when empty
