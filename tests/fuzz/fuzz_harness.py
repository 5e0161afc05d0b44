"""Runs a fuzz case on both engines, the way `cep run` does, and says where they disagree.

Each engine gets the same input files and a data store of its own, created and filled alike
(a SQLite file, or a fresh PostgreSQL database), and runs through `deployer.runner`'s engine table
with `--until-idle`: the reference executor (`local`) and Spark (on the session the caller
brings, reused across cases; `max_files_per_trigger` from the case). Then every sink stream, the
dead letters, the run's counters and the tables the script writes are compared:

- rows as multisets, and in order where the language defines one (docs/language.md, "Semantics of
  the stateful operators": a stream's events in event-time order, ties by arrival; an aggregate's
  rows in order within a group);
- doubles to 10 significant digits (a sum of doubles depends on the order of its additions, which
  the language does not fix); decimals, integers, strings and timestamps exactly, as written;
- dead letters by stage, reason, stream, node, line, event, record and source;
- counters: events in and out, dead-lettered, late, filtered, applied.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from fuzz_case import Case
from psycopg import sql

from cpl.compiler import compile_script
from deployer import runner
from deployer.engine import RunRequest, RunSummary
from operators import graph as g

Row = dict[str, Any]
PARTITIONS = "CEP_SHUFFLE_PARTITIONS"
CLOCK = "CEP_TRIGGER_CLOCK"  # the triggers' clock (deployer.triggers.clock), a case's own


class Divergence(AssertionError):
    """The engines disagree on a case; the message says where, then shows the case."""


@dataclass
class Result:
    engine: str
    summary: RunSummary | None  # None: the run failed (`error`)
    error: str | None = None
    streams: dict[str, list[Row]] = field(default_factory=dict)
    dead: list[Row] = field(default_factory=list)
    tables: dict[str, list[tuple[Any, ...]] | None] = field(default_factory=dict)
    said: str = ""  # what the run printed (progress, restarts): evidence when a divergence is flaky


# ---- inputs and stores -------------------------------------------------------------------------------


def write_inputs(case: Case, root: Path) -> dict[str, str]:
    """Each stream's files under root/<stream>/; the --source URIs. Files are named in order; their
    modification times are increasing, all equal or reversed: a file source reads by name whatever
    they are (docs/language.md, "Event time")."""
    uris = {}
    for stream, files in case.inputs.items():
        d = root / stream
        d.mkdir(parents=True, exist_ok=True)
        for i, lines in enumerate(files):
            path = d / f"part-{i:04d}.jsonl"
            path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
            t = 1_700_000_000 + {"increasing": i, "equal": 0, "reversed": -i}[case.mtimes]
            os.utime(path, (t, t))
        uris[stream] = f"file:{d}"
    return uris


@contextmanager
def store_url(case: Case, tmp: Path, postgres_url: str | None) -> Iterator[str | None]:
    """The URL of a store created and filled from the case, dropped afterwards. Each engine runs
    against a store of its own made under the same name, one after the other, so that what the
    engines say of it (a dead letter's reason names the store's URL) can be compared."""
    if case.store is None:
        yield None
        return
    if case.store == "sqlite":
        path = tmp / "store" / "db.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        with sqlite3.connect(path) as conn:
            for t in case.tables:
                conn.execute(t.ddl)
                marks = ", ".join("?" for _ in t.columns)
                conn.executemany(f"INSERT INTO {t.name} ({', '.join(t.columns)}) VALUES ({marks})", t.rows)
        conn.close()
        try:
            yield f"sqlite:///{path}"
        finally:
            path.unlink(missing_ok=True)
        return
    if postgres_url is None:
        raise ValueError("a PostgreSQL case needs a server")
    name = f"fz_{case.digest}"
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    try:
        with psycopg.connect(url) as conn:
            for t in case.tables:
                conn.execute(t.ddl.encode())
                marks = ", ".join("%s" for _ in t.columns)
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {t.name} ({', '.join(t.columns)}) VALUES ({marks})".encode(), t.rows
                    )
        yield url
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(drop)


def read_tables(url: str | None, names: list[str]) -> dict[str, list[tuple[Any, ...]] | None]:
    """Each table's rows; None for a table that does not exist."""
    if url is None or not names:
        return {}
    out: dict[str, list[tuple[Any, ...]] | None] = {}
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url[len("sqlite:///") :]) as conn:
            present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for t in names:
                out[t] = [tuple(r) for r in conn.execute(f"SELECT * FROM {t}")] if t in present else None
        conn.close()
        return out
    with psycopg.connect(url) as conn:
        present = {r[0] for r in conn.execute(b"SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        for t in names:
            out[t] = [tuple(r) for r in conn.execute(f"SELECT * FROM {t}".encode())] if t in present else None
    return out


# ---- running -------------------------------------------------------------------------------------------


def _read_jsonl(directory: Path, prefix: str) -> list[Row]:
    if not directory.is_dir():
        return []
    rows: list[Row] = []
    for p in sorted(directory.iterdir()):
        if p.name.startswith(prefix) and p.name.endswith(".jsonl"):
            for line in p.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rows.append(json.loads(line, parse_float=Decimal))
    return rows


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """`values` set in os.environ for the duration, then each variable as it was."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_engine(
    engine: str,
    graph: g.Graph,
    case: Case,
    sources: dict[str, str],
    side: Path,
    url: str | None,
) -> Result:
    out, dead = side / "out", side / "dead"
    req = RunRequest(
        graph,
        engine=engine,
        sources=sources,
        sinks={s: f"file:{out}" for s in case.sinks},
        stores={"db": url} if url else {},
        dead_letter=f"file:{dead}",
        until_idle=True,
        checkpoint=str(side / "checkpoint") if engine == "spark" else None,
        max_files_per_trigger=case.max_files if engine == "spark" else None,
    )
    stores = runner.bind_stores(graph, req.stores)
    log = io.StringIO()
    # both engines read these settings from the environment when a run starts
    settings = {PARTITIONS: str(case.partitions)}
    if case.trigger_clock is not None:  # else a caller's (a test's monkeypatch) holds
        settings[CLOCK] = case.trigger_clock
    with _environment(settings):
        try:
            result = Result(engine, runner.engine(engine)(req, stores, log))
        except Exception as err:  # a run that fails is a finding: no input may fail a run
            result = Result(engine, None, f"{type(err).__name__}: {err}")
    result.said = log.getvalue()
    for s in case.sinks:
        result.streams[s] = _read_jsonl(out, f"{s}-")
    result.dead = _read_jsonl(dead, "dead-letter-")
    result.tables = read_tables(url, case.compare_tables)
    return result


# What the reference may take on one case: they take a second or less. A drawn case can make a run
# explode (a pattern's absences firing every 250 ms over an hour of event time, tens of thousands of
# rows, into a join: hundreds of millions of pairs; a soak sat on one for 15 minutes at 10 GB):
# such a case is too costly to compare, not a finding (docs/fuzzing.md, "Budget").
REFERENCE_BUDGET_S = 120


class TooCostly(BaseException):
    """The reference ran past `REFERENCE_BUDGET_S` on a case (a BaseException: `run_engine` takes any
    Exception for a failed run, which this is not)."""


@contextmanager
def budget(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # a signal reaches the main thread only
        return

    def expired(signum: int, frame: Any) -> None:
        raise TooCostly(f"the reference ran past {seconds} s")

    before = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def run_case(case: Case, spark: Any, postgres_url: str | None, tmp: Path) -> tuple[Result, Result]:
    """(reference, Spark) results of one case. `spark` is the session Spark's engine finds active."""
    del spark  # the engine takes the active session (deployer.spark.run.session.spark_session)
    graph = compile_script(case.script).graph
    sources = write_inputs(case, tmp / "in")
    results = []
    for engine in ("local", "spark"):
        side = tmp / engine
        side.mkdir(parents=True, exist_ok=True)
        with store_url(case, tmp, postgres_url) as url:
            if engine == "local":
                with budget(REFERENCE_BUDGET_S):
                    results.append(run_engine(engine, graph, case, sources, side, url))
            else:
                results.append(run_engine(engine, graph, case, sources, side, url))
    return results[0], results[1]


# ---- comparing -----------------------------------------------------------------------------------------


def _num(v: Any) -> Any:
    """Doubles to 10 significant digits, with magnitudes below 1e-9 taken as zero."""
    f = float(v)
    return 0.0 if abs(f) < 1e-9 else float(f"{f:.10g}")


def _norm(v: Any, kind: str | None = None) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if kind == "double" and isinstance(v, int | float | Decimal):
        return ("double", _num(v))
    if isinstance(v, Decimal):
        return ("number", str(v)) if kind == "decimal" else ("number", _num(v))
    if isinstance(v, float):
        return ("number", _num(v))
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    return v


def _kinds(graph: g.Graph, stream: str) -> dict[str, str]:
    return {f.name: f.type.kind for f in graph.stream_schema(stream)}


def _canon(row: Row, kinds: dict[str, str]) -> tuple[tuple[str, Any], ...]:
    return tuple((k, _norm(v, kinds.get(k))) for k, v in row.items())


def _dead(rows: list[Row]) -> Counter[tuple[Any, ...]]:
    keys = ("stage", "reason", "stream", "node", "line", "record", "source")
    return Counter((*(r.get(k) for k in keys), _norm(r.get("event"))) for r in rows)


def _show(counter: Counter[Any], limit: int = 8) -> str:
    items = sorted(counter.elements(), key=str)
    more = f" ... ({len(items) - limit} more)" if len(items) > limit else ""
    return "\n      ".join(map(str, items[:limit])) + more


def differences(case: Case, ref: Result, spk: Result) -> list[str]:
    """What differs between the two engines' results, one entry per stream, table or counter."""
    if ref.error or spk.error:
        if ref.error and spk.error and _cause(ref.error) == _cause(spk.error):
            return []  # both stopped, for the same reason (a store error no event caused)
        return [f"a run failed: reference {ref.error or 'ran'}; Spark {spk.error or 'ran'}"]
    graph = compile_script(case.script).graph
    found = []
    for s in case.sinks:
        kinds = _kinds(graph, s)
        a = [_canon(r, kinds) for r in ref.streams[s]]
        b = [_canon(r, kinds) for r in spk.streams[s]]
        ca, cb = Counter(a), Counter(b)
        if ca != cb:
            found.append(
                f"stream {s}: {len(a)} rows on the reference, {len(b)} on Spark\n"
                f"    only on the reference:\n      {_show(ca - cb)}\n    only on Spark:\n      {_show(cb - ca)}"
            )
            continue
        order = case.ordered.get(s)
        if order is not None and _groups(a, order) != _groups(b, order):
            within = f" within each group of {order}" if order else ""
            found.append(
                f"stream {s}: the same rows in another order{within}\n    reference: {a}\n    spark:     {b}"
            )
    da, db = _dead(ref.dead), _dead(spk.dead)
    if da != db:
        found.append(
            f"dead letters: {len(ref.dead)} on the reference, {len(spk.dead)} on Spark\n"
            f"    only on the reference:\n      {_show(da - db)}\n    only on Spark:\n      {_show(db - da)}"
        )
    for t in case.compare_tables:
        ra, rb = ref.tables.get(t), spk.tables.get(t)
        if (ra is None) != (rb is None):
            found.append(f"table {t}: exists on {'Spark' if ra is None else 'the reference'} only")
            continue
        ta = Counter(tuple(_norm(v) for v in r) for r in ra or [])
        tb = Counter(tuple(_norm(v) for v in r) for r in rb or [])
        if ta != tb:
            found.append(
                f"table {t}: only on the reference:\n      {_show(ta - tb)}\n    only on Spark:\n      {_show(tb - ta)}"
            )
    counters = ("events_in", "events_out", "dead_lettered", "late", "applied", "filtered")
    ca_, cb_ = ({c: getattr(r.summary, c) for c in counters} for r in (ref, spk))
    if ca_ != cb_:
        found.append(f"counters: reference {ca_}, Spark {cb_}")
    return found


def _cause(error: str) -> str:
    """What a failed run says of its cause, without what each engine adds around it: Spark's
    `query <name> failed: ...; its unfinished batch is kept ...`, the local engine's `...; the run
    stopped there ...`."""
    text = error.split(": ", 1)[1] if error.startswith(("QueryFailed", "RunFailed")) else error
    if text.startswith("query ") and " failed: " in text:
        text = text.split(" failed: ", 1)[1]
    return text.split("; its unfinished batch")[0].split("; the run stopped there")[0]


def _groups(rows: list[tuple[tuple[str, Any], ...]], keys: list[str]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for r in rows:
        d = dict(r)
        out.setdefault(tuple(d.get(k) for k in keys), []).append(r)
    return out


def check_case(case: Case, spark: Any, postgres_url: str | None, tmp: Path) -> Result:
    """Run `case` on both engines; raise Divergence naming every difference. The reference's result
    (what the fuzzer's coverage reads: fuzz_coverage)."""
    ref, spk = run_case(case, spark, postgres_url, tmp)
    found = differences(case, ref, spk)
    if found:
        said = spk.said.strip().splitlines()[-20:]
        if said:
            found.append("the Spark run printed:\n    " + "\n    ".join(said))
        raise Divergence("\n".join(found) + "\n\n--- the case ---\n" + case.describe())
    return ref
