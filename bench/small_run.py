"""What a small run costs a user end to end: `cep run --until-idle` of 400 events against the same work
hand-written in PySpark (bench/hand_small_run), each a fresh process (a fresh JVM), as a user runs it.

Two workloads, on the same generated input (bench/cdr.py: 200 CDR events in each of two streams over
3 days, 1,000 callers, each with a plan in SQLite):

- **daily bill**: examples/daily_bill.cpl, the plans and the `daily_bill` table in SQLite;
- **stateless**: `STATELESS` below (union, filter, map) into a file sink.

Each side's round is measured from the bench process: the whole run (spawn to exit) and the time to
first result (spawn until a reader polling every 20 ms sees a row: in `daily_bill`, or in a non-empty
output file). Both sides record the moments of their run (bench/small_run_probe wraps `cep run`'s;
the hand-written job notes its own), from which a row's `breakdown` gives each side's median phases:
the interpreter's start and imports, the JVM and session, building the job (the project: the
deployment's construction and start, i.e. registering its sources and translating the graph; by
hand: readStream ... start), the queries' planning of their first batch, their execution
(`addBatch`) and commits (`walCommit` + `commitOffsets`), summed over queries (which may overlap), and
stopping and exiting. The startup is the interpreter's and the imports, and for the project the
CLI's compiling of the script too. A round whose two sides wrote different rows fails the workload:
its row is an error, not figures. The rounds follow an unmeasured run of each side (`warm_up`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rounds import ROUNDS, alternating, row
from small_run_outputs import Rows, bills_visible, bills_written, files_visible, files_written

HERE = Path(__file__).resolve().parent
DAILY_BILL = HERE.parent / "examples" / "daily_bill.cpl"
BASELINE = "hand-written PySpark, same session"
EVENTS = 200  # per stream
CALLERS = 1000  # the events' callers, every one of them with a plan
TIMEOUT_S = 900.0  # a side's run, far beyond what one takes on a loaded 2-core machine
POLL_S = 0.02

_CDR = "idcaller integer, idreceiver integer, duration integer, timestamp timestamp"
STATELESS = f"""
CREATE STREAMSCHEMA cdr1 WITH {_CDR} TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
CREATE STREAMSCHEMA cdr2 WITH {_CDR} TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
INSERT INTO unionout SELECT * FROM cdr1, cdr2;
INSERT INTO costs SELECT idcaller, duration * 10 + 10 AS cost, timestamp FROM unionout WHERE duration >= 10;
"""

# Rules over both streams, each its own sink: one query for all of them (deployer.spark.run.
# pattern_groups), against a query per rule (the baseline, `PATTERNS_APART`)
PATTERN_RULES = {
    "long_pairs": "SELECT e1.idcaller AS c1, e2.idcaller AS c2, match_time() AS t "
    "FROM PATTERN EVERY e1=cdr1[duration > 300] -> e2=cdr2[duration > 300] WITHIN 2 HOURS",
    "unanswered": "SELECT e1.idcaller AS c, match_time() AS t "
    "FROM PATTERN EVERY e1=cdr1[duration > 400] -> NOT cdr2[duration > 400] FOR 1 HOUR WITHIN 2 HOURS",
    "short_runs": "SELECT e1.idcaller AS c, count(e2.duration) AS n, e3.idcaller AS c3 "
    "FROM PATTERN EVERY e1=cdr1[duration < 20] -> e2=cdr2[duration < 60]<2:3> -> e3=cdr1 WITHIN 6 HOURS",
    "back_to_back": "SELECT e1.idcaller AS c1, e2.idcaller AS c2 "
    "FROM SEQUENCE EVERY e1=cdr2[duration > 200], e2=cdr1[duration > 200] WITHIN 1 HOUR",
    "zero_either": "SELECT e1.idcaller AS c1, e2.idcaller AS c2 "
    "FROM PATTERN EVERY e1=cdr1[duration = 0] OR e2=cdr2[duration = 0] WITHIN 1 HOUR",
}
PATTERNS = STATELESS.split("INSERT", 1)[0] + "".join(
    f"INSERT INTO {name} {rule};\n" for name, rule in PATTERN_RULES.items()
)


@dataclass
class Side:
    """One side's round: wall seconds, seconds to its first row, its `phases` and its rows."""

    seconds: float
    first: float
    phases: dict[str, float]
    rows: Rows


@dataclass
class Workload:
    """How each side runs one workload in a round's directory `d` (the input under `inbox`, the
    pristine plans database `plans`): argv and extra environment, where to look for its first row,
    and how to read what it wrote."""

    name: str
    project: Callable[[Path, Path, Path], tuple[list[str], dict[str, str]]]
    baseline: Callable[[Path, Path, Path], tuple[list[str], dict[str, str]]]
    visible: Callable[[Path, bool], Callable[[], bool]]
    written: Callable[[Path, bool], Rows]
    baseline_name: str = BASELINE


# ---- the two workloads -----------------------------------------------------------------------------


def _probe(script: Path, inbox: Path, *more: str) -> list[str]:
    sources = ["--source", f"cdr1=file:{inbox / 'cdr1'}", "--source", f"cdr2=file:{inbox / 'cdr2'}"]
    return [sys.executable, str(HERE / "small_run_probe.py"), "run", str(script), *sources, *more]


def _hand(*args: str) -> list[str]:
    return [sys.executable, str(HERE / "hand_small_run.py"), *args]


def daily_project(d: Path, inbox: Path, plans: Path) -> tuple[list[str], dict[str, str]]:
    shutil.copy(plans, d / "crm.sqlite3")  # a fresh store: a run's ledger would skip the next run's writes
    env = {"CEP_STORE_CRM_URL": f"sqlite:///{d / 'crm.sqlite3'}"}
    return _probe(DAILY_BILL, inbox, "--until-idle"), env


def daily_spark_jvm(d: Path, inbox: Path, plans: Path) -> tuple[list[str], dict[str, str]]:
    """The same `cep run` with Spark's JVM options and no class archive (docs/settings.md)."""
    argv, env = daily_project(d, inbox, plans)
    return argv, env | {"CEP_BOUNDED_JVM_OPTIONS": "none", "CEP_JVM_ARCHIVE": "0"}


def daily_hand(d: Path, inbox: Path, plans: Path) -> tuple[list[str], dict[str, str]]:
    return _hand("daily", str(inbox), str(plans), str(d / "bills.sqlite3"), str(d / "checkpoint")), {}


def stateless_project(d: Path, inbox: Path, plans: Path) -> tuple[list[str], dict[str, str]]:
    (d / "stateless.cpl").write_text(STATELESS)
    argv = _probe(d / "stateless.cpl", inbox, "--sink", f"costs=file:{d / 'out'}", "--until-idle")
    return argv, {}


def stateless_hand(d: Path, inbox: Path, plans: Path) -> tuple[list[str], dict[str, str]]:
    return _hand("stateless", str(inbox), str(d / "out"), str(d / "checkpoint")), {}


def patterns_project(d: Path, inbox: Path, plans: Path) -> tuple[list[str], dict[str, str]]:
    (d / "patterns.cpl").write_text(PATTERNS)
    sinks = [a for name in PATTERN_RULES for a in ("--sink", f"{name}=file:{d / 'out'}")]
    return _probe(d / "patterns.cpl", inbox, *sinks, "--until-idle"), {}


def patterns_apart(d: Path, inbox: Path, plans: Path) -> tuple[list[str], dict[str, str]]:
    argv, env = patterns_project(d, inbox, plans)
    return argv, env | {"SMALL_RUN_PATTERNS_APART": "1"}


WORKLOADS = [
    Workload("daily bill", daily_project, daily_hand, bills_visible, bills_written),
    Workload("stateless", stateless_project, stateless_hand, files_visible, files_written),
    # what a bounded run's JVM options and class archive save, against the same run without them
    Workload(
        "daily bill, bounded JVM",
        daily_project,
        daily_spark_jvm,
        lambda d, _: bills_visible(d, True),
        lambda d, _: bills_written(d, True),
        "the same cep run, Spark's JVM defaults",
    ),
    Workload(
        "5 pattern rules",
        patterns_project,
        patterns_apart,
        files_visible,
        files_written,
        "the same cep run, a query per rule",
    ),
]


# ---- one side's round ------------------------------------------------------------------------------


def _wait(argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[float, float, int]:
    """Run `argv` to its end in a process group of its own (killed whole after TIMEOUT_S), its output
    appended to `log`. Returns (spawn time, exit time, exit code)."""
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n==== {' '.join(argv)}\n")
        out.flush()
        spawned = time.time()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError(
                f"{Path(argv[1]).name} still running after {TIMEOUT_S:.0f} s (log: {log})"
            ) from None
        return spawned, time.time(), rc


def spawn(
    argv: list[str], env: dict[str, str], cwd: Path, log: Path, visible: Callable[[], bool]
) -> tuple[float, float, float]:
    """Run `argv` to its end (`_wait`) while a thread polls `visible` every POLL_S. Returns (spawn
    time, exit time, the first time `visible` held)."""
    first: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if visible():
                first.append(time.time())
                return
            time.sleep(POLL_S)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        spawned, exited, rc = _wait(argv, env, cwd, log)
    finally:
        stop.set()
        watcher.join()
    if rc != 0:
        raise RuntimeError(f"{Path(argv[1]).name} exited with {rc} (log: {log})")
    if not first and visible():  # written between the last poll and the exit
        first.append(exited)
    if not first:
        raise RuntimeError(f"{Path(argv[1]).name} wrote no row (log: {log})")
    return spawned, exited, first[0]


def phases(t: dict[str, Any], spawned: float, exited: float) -> dict[str, float]:
    """A side's phases (seconds) from the moments it recorded (bench/small_run_probe's shape)."""
    (session_begin, session_end), *_ = t["session"]
    building = [span for key in ("init", "start", "build") for span in t.get(key, [])]
    built = max(end for _, end in building)
    batches = []  # (whether it is its query's first, the batch's progress)
    for q in t["queries"]:
        first = min((b["batchId"] for b in q["batches"]), default=None)
        batches += [(b["batchId"] == first, b) for b in q["batches"]]

    def ms(keys: tuple[str, ...], first: bool | None = None) -> float:
        return sum(b["durationMs"].get(k, 0) for f, b in batches if first in (None, f) for k in keys) / 1000

    return {
        "startup (interpreter, imports, compiling)": session_begin - spawned,
        "JVM and session start": session_end - session_begin,
        "building the job": sum(end - begin for begin, end in building),
        "queries running (wall)": t["done"] - built,
        "planning, first batch of each query (sum)": ms(("queryPlanning",), True),
        "planning, later batches (sum)": ms(("queryPlanning",), False),
        "execution, addBatch (sum)": ms(("addBatch",)),
        "commit, walCommit + commitOffsets (sum)": ms(("walCommit", "commitOffsets")),
        "stop and exit": exited - t["done"],
        "streaming queries": len(t["queries"]),
        "micro-batches": len(batches),
    }


def run_side(w: Workload, project: bool, d: Path, inbox: Path, plans: Path, log: Path) -> Side:
    """One round of one side in the fresh directory `d`; Spark's log is appended to `log` after it."""
    d.mkdir(parents=True)
    argv, env = (w.project if project else w.baseline)(d, inbox, plans)
    env |= {"CEP_DATA_DIR": str(d / "data"), "SMALL_RUN_TIMINGS": str(d / "timings.json")}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        spawned, exited, first = spawn(argv, env, d, log, w.visible(d, project))
    finally:
        with log.open("a", encoding="utf-8") as out:
            for spark_log in sorted((d / "data" / "logs").glob("*.log")):
                out.write(f"---- {spark_log.name}\n{spark_log.read_text(errors='replace')}")
    t = json.loads((d / "timings.json").read_text())
    return Side(exited - spawned, first - spawned, phases(t, spawned, exited), w.written(d, project))


# ---- the rows --------------------------------------------------------------------------------------


def _medians(sides: list[Side]) -> dict[str, float]:
    return {k: statistics.median(s.phases[k] for s in sides) for k in sides[0].phases}


def _note(p: dict[str, float], b: dict[str, float]) -> str:
    def pair(key: str) -> str:
        return f"{p[key]:.1f} vs {b[key]:.1f} s"

    return (
        "median phases, project vs baseline: "
        f"startup {pair('startup (interpreter, imports, compiling)')}, "
        f"JVM and session {pair('JVM and session start')}, "
        f"building the job {pair('building the job')}, "
        f"queries running {pair('queries running (wall)')}, "
        f"of which (summed over {p['streaming queries']:.0f} vs {b['streaming queries']:.0f} queries, "
        f"{p['micro-batches']:.0f} vs {b['micro-batches']:.0f} batches) "
        f"first planning {pair('planning, first batch of each query (sum)')}, "
        f"addBatch {pair('execution, addBatch (sum)')}, "
        f"commits {pair('commit, walCommit + commitOffsets (sum)')}; "
        f"stop and exit {pair('stop and exit')}"
    )


def _differences(bs: list[Side], ps: list[Side]) -> str | None:
    """Why the rounds' outputs do not match, if they do not: each round's two sides must have
    written the same rows, and some."""
    for r, (b, p) in enumerate(zip(bs, ps, strict=True)):
        if not p.rows:
            return f"round {r}: the project wrote no row"
        if b.rows != p.rows:
            only_p, only_b = p.rows - b.rows, b.rows - p.rows
            example = next(iter(only_p or only_b))
            return (
                f"round {r}: the outputs differ: project {p.rows.total()} rows, hand-written "
                f"{b.rows.total()}; {only_p.total()} only in the project's, {only_b.total()} only in the "
                f"hand-written's, e.g. {example} ({'project' if only_p else 'hand-written'})"
            )
    return None


def measure(w: Workload, tmp: Path, inbox: Path, plans: Path, log: Path) -> list[dict[str, Any]]:
    """ROUNDS interleaved rounds of both sides of `w`: its two rows, or an error row."""
    bs, ps = alternating(
        ROUNDS,
        lambda tag: run_side(w, False, tmp / tag, inbox, plans, log),
        lambda tag: run_side(w, True, tmp / tag, inbox, plans, log),
    )
    differ = _differences(bs, ps)
    if differ is not None:
        return [{"workload": f"small run, {w.name}", "error": differ}]
    p, b = _medians(ps), _medians(bs)
    common: dict[str, Any] = {"unit": "s", "lower_is_better": True}
    return [
        row(
            f"small run, {w.name}: whole run",
            [s.seconds for s in ps],
            [s.seconds for s in bs],
            w.baseline_name,
            **common,
            note=_note(p, b),
            breakdown={"project": p, "baseline": b},
            rows_written=ps[0].rows.total(),
        ),
        row(
            f"small run, {w.name}: first result",
            [s.first for s in ps],
            [s.first for s in bs],
            w.baseline_name,
            **common,
            note="from the process's spawn until a reader polling every 20 ms sees the first row",
        ),
    ]


def generate(tmp: Path) -> tuple[Path, Path]:
    """The input (bench/cdr.py's CLI): the events' directory and the plans database."""
    inbox, plans = tmp / "in", tmp / "plans.sqlite3"
    cdr = [sys.executable, str(HERE / "cdr.py")]
    events = ["--streams", "cdr1,cdr2", "--events", str(EVENTS), "--callers", str(CALLERS)]
    events += ["--days", "3", "--seed", "7"]
    subprocess.run([*cdr, "events", str(inbox), *events], check=True, capture_output=True)
    subprocess.run(
        [*cdr, "plans", f"sqlite:///{plans}", "--callers", str(CALLERS)], check=True, capture_output=True
    )
    return inbox, plans


def warm_up(tmp: Path, inbox: Path, plans: Path, log: Path) -> None:
    """One unmeasured run of each side (the project's first): the rounds measure a machine on which
    both have run before, as a user's is after the first run: Spark's jars in the file cache, and the
    JVM's class archive written, which the first bounded `cep run` makes and every later run of
    either side maps (deployer.spark.run.jvm_archive; the hand-written job's session is
    `spark_session`'s). Without it the first round alone paid for them."""
    stateless = WORKLOADS[1]
    run_side(stateless, True, tmp / "project", inbox, plans, log)
    run_side(stateless, False, tmp / "baseline", inbox, plans, log)


def run(log: Path) -> list[dict[str, Any]]:
    """Both workloads; their rows (or an error row each). The sides' output goes to `log`."""
    out: list[dict[str, Any]] = []
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="small-run-") as tmp:
        inbox, plans = generate(Path(tmp))
        try:
            warm_up(Path(tmp, "warm-up"), inbox, plans, log)
        except Exception as err:
            return [{"workload": f"small run, {w.name}", "error": f"warm-up: {err}"} for w in WORKLOADS]
        for w in WORKLOADS:
            try:
                out += measure(w, Path(tmp, w.name.replace(" ", "-")), inbox, plans, log)
            except Exception as err:  # report the workload as failed, measure the other
                out.append({"workload": f"small run, {w.name}", "error": str(err).splitlines()[0][:300]})
            print(f"  small run, {w.name}: done", file=sys.stderr)
    return out
