"""Does a long-lived Spark application grow with the deployments it has run?

`cep serve` runs every deployment in one Spark application. This runs what it runs, a
`ServiceDeployment`, CYCLES times in one session (deploy: build and start; run: until its input is
consumed; undeploy: stop), each with its own checkpoint and outputs, over the same small input
(examples/daily_bill.cpl's union, filter, map and daily window, without its store: 100 events in
two files), and records after chosen cycles the driver JVM's heap in use after a full collection
(`MemoryMXBean` after `System.gc()`), the resident memory of the JVM and of this Python process,
the JVM's open files (its /proc entry's `fd`: deployer.spark.run.reclaim says what a stopped
deployment left open), the listeners on the application's listener bus (a stateful query's
session left one), the child allocators of Arrow's root allocator (a Python source left one) and
the loggers SLF4J's log4j binding keeps named after a state store (each store took three).
The row compares the 200th with the 20th: the issue's goal is within 10 %.

A stopped query's state stores stay loaded (their RocksDB instances open, their objects in the heap)
until the stores' maintenance, every 10 s here, unloads them: right after a cycle the last few
deployments' stores are still there (6 to 36 in one run), and the heap and resident memory right
after a cycle depend on where in that period the mark falls. Each mark also waits until no store is
loaded (at most 30 s) and measures the heap and the JVM's resident memory again ("stores
unloaded"): what the service keeps. The cycles' time leaves the marks out.

Where the JVM's resident memory goes: when `jcmd` is there and the JVM is started here, it runs with
`-XX:NativeMemoryTracking=summary` (about 15 MB and a little CPU of its own), and each mark also
records, from `jcmd <pid> VM.native_memory summary`, the heap's committed size, the JIT's compiled
code, the classes' metadata, and what the JVM does not track at all (its resident memory less all
it has committed: native libraries' allocations, RocksDB's among them).

    bench/run --only serve        (200 cycles; --quick: 40)
"""

from __future__ import annotations

import gc
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CYCLES = 200
MARKS = (1, 10, 20, 50, 100, 150, 200)
SCRIPT = """
CREATE STREAMSCHEMA cdr1 WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp
  TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
CREATE STREAMSCHEMA cdr2 WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp
  TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
INSERT INTO unionout SELECT * FROM cdr1, cdr2;
INSERT INTO costs SELECT idcaller, duration * 10 + 10 AS cost, timestamp FROM unionout WHERE duration >= 10;
INSERT INTO daily SELECT idcaller, window_start() AS day, sum(cost) AS total, count(*) AS calls
  FROM costs WINDOW TIME SIZE 1 DAY ADVANCE 1 DAY GROUP BY idcaller;
"""


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


NMT = "-XX:NativeMemoryTracking=summary"
# `jcmd ... VM.native_memory summary` categories kept per mark (committed MB)
_NATIVE = {"Java Heap": "jvm_heap_committed_mb", "Code": "jvm_code_mb", "Metaspace": "jvm_metaspace_mb"}


def _track_native_memory() -> None:
    """Start the JVM this process starts with native memory tracking, when `jcmd` can read it."""
    if shutil.which("jcmd") is None:
        return
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if NMT not in opts:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} {NMT}".strip()


def _native(jvm_pid: int, rss_mb: float) -> dict[str, float]:
    """The JVM's committed memory by category, and its resident memory less all it has committed;
    nothing when the JVM tracks none (started before this bench, or without `jcmd`)."""
    if shutil.which("jcmd") is None:
        return {}
    said = subprocess.run(
        ["jcmd", str(jvm_pid), "VM.native_memory", "summary"], capture_output=True, text=True, timeout=60
    ).stdout
    found: dict[str, float] = {}
    for line in said.splitlines():
        total = re.match(r"Total: reserved=\d+KB, committed=(\d+)KB", line)
        if total:
            found["jvm_untracked_mb"] = rss_mb - int(total.group(1)) / 1024
        part = re.match(r"-\s+(.+?)\s+\(reserved=\d+KB, committed=(\d+)KB\)", line)
        if part and part.group(1) in _NATIVE:
            found[_NATIVE[part.group(1)]] = int(part.group(2)) / 1024
    return found


def _measure(spark: Any, jvm_pid: int) -> dict[str, float]:
    from deployer.spark.run.reclaim import store_loggers

    gc.collect()  # py4j frees a JVM object once Python has freed its proxy (as cep serve does)
    jvm = spark.sparkContext._jvm
    for _ in range(2):
        jvm.java.lang.System.gc()
        time.sleep(0.5)
    heap = jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed()
    rss_mb = _rss_kb(jvm_pid) / 1024
    fds = Path(f"/proc/{jvm_pid}/fd")
    listeners = spark.sparkContext._jsc.sc().listenerBus().listeners().size()
    allocators = jvm.org.apache.spark.sql.util.ArrowUtils.rootAllocator().getChildAllocators().size()
    return {
        "heap_mb": heap / 2**20,
        "jvm_rss_mb": rss_mb,
        "python_rss_mb": _rss_kb(os.getpid()) / 1024,
        **({"jvm_open_files": float(len(os.listdir(fds)))} if fds.is_dir() else {}),
        "jvm_listeners": float(listeners),
        "jvm_arrow_allocators": float(allocators),
        # named after a state store (a stopped deployment's are dropped: deployer.spark.run.reclaim)
        "jvm_store_loggers": float(len(store_loggers(spark))),
        **_native(jvm_pid, rss_mb),
    }


def _loaded_stores(spark: Any) -> int:
    """The state store providers loaded in the driver's JVM (Spark's `StateStore` object's private
    map; Spark 4.3), -1 when it cannot be read."""
    from deployer.spark.run.reclaim import jvm_field

    jvm = spark.sparkContext._jvm
    try:
        cls = jvm.java.lang.Class.forName("org.apache.spark.sql.execution.streaming.state.StateStore$")
        return int(jvm_field(cls.getField("MODULE$").get(None), "loadedProviders").size())
    except Exception:  # another Spark
        return -1


def _mark(spark: Any, jvm_pid: int) -> dict[str, float]:
    """A mark: the measures right after a cycle, the stores still loaded, and the heap and the JVM's
    resident memory again once the maintenance has unloaded them (see the module)."""
    now = {**_measure(spark, jvm_pid), "loaded_stores": float(_loaded_stores(spark))}
    deadline = time.monotonic() + 30
    while _loaded_stores(spark) > 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    later = _measure(spark, jvm_pid)
    return {**now, **{f"unloaded_{key}": later[key] for key in ("heap_mb", "jvm_rss_mb")}}


def _inputs(root: Path) -> dict[str, str]:
    from cdr import write_events  # bench/cdr.py

    for k, stream in enumerate(("cdr1", "cdr2")):
        write_events(root, stream, 50, callers=20, days=3, seed=k + 1, per_file=50)
    return {s: f"file:{root / s}" for s in ("cdr1", "cdr2")}


def run(cycles: int = CYCLES) -> dict[str, Any]:
    from cpl.compiler import compile_script
    from deployer.service.spark_runs import ServiceDeployment
    from deployer.spark.run.session import spark_session

    work = Path(tempfile.mkdtemp(prefix="cep-serve-cycles-"))
    try:
        _track_native_memory()
        spark = spark_session(log=work / "spark.log")
        graph = compile_script(SCRIPT).graph
        jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
        sources = _inputs(work / "in")
        marks: dict[int, dict[str, float]] = {}
        started, measuring = time.monotonic(), 0.0
        for k in range(1, cycles + 1):
            d = ServiceDeployment(
                spark,
                graph,
                sources,
                {"daily": f"file:{work / 'out' / str(k)}"},
                str(work / "ck" / str(k)),
                dead_letter=f"file:{work / 'dead' / str(k)}",
                until_idle=True,
                name=f"cycle{k}",
            )
            d.run(out=io.StringIO())
            del d  # as `cep serve` forgets a deployment it stopped (deployer.service.daemon)
            shutil.rmtree(work / "ck" / str(k), ignore_errors=True)
            shutil.rmtree(work / "out" / str(k), ignore_errors=True)
            if k in MARKS or k == cycles:
                at = time.monotonic()
                marks[k] = _mark(spark, jvm)
                measuring += time.monotonic() - at
                print(f"serve cycles: {k}: {json.dumps(marks[k])}", file=sys.stderr, flush=True)
        first, last = marks.get(20), marks[cycles]
        out: dict[str, Any] = {
            "cycles": cycles,
            "seconds": time.monotonic() - started - measuring,
            "marks": marks,
        }
        if first is not None:
            # a count of 0 (Arrow's child allocators) has no growth to divide by
            out["growth"] = {key: last[key] / first[key] for key in first if first[key]}
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


_UNITS = {
    "jvm_open_files": "files",
    "jvm_listeners": "listeners",
    "jvm_arrow_allocators": "allocators",
    "jvm_store_loggers": "loggers",
    "loaded_stores": "stores",
}


def rows(quick: bool) -> list[dict[str, Any]]:
    """The group's rows: each memory after the last cycle against after the 20th (ratio = the 20th's
    over the last's: at least 0.91 is within the goal's 10 %). One run of the cycles, not three
    rounds: 200 take about half an hour (1,956 s on 2026-11-30); `--quick` runs 40 cycles."""
    from rounds import row

    result = run(40 if quick else CYCLES)
    last, first = result["marks"][result["cycles"]], result["marks"][20]
    what = {
        "heap_mb": "driver heap after GC",
        "jvm_rss_mb": "JVM resident",
        "unloaded_heap_mb": "driver heap after GC, stores unloaded",
        "unloaded_jvm_rss_mb": "JVM resident, stores unloaded",
        "loaded_stores": "state stores still loaded",
        "python_rss_mb": "Python resident",
        "jvm_open_files": "JVM open files",
        "jvm_listeners": "listeners on the application's bus",
        "jvm_arrow_allocators": "Arrow's child allocators",
        "jvm_store_loggers": "state stores' loggers SLF4J keeps",
        # the JVM's own accounting, when it kept one (_native)
        "jvm_code_mb": "JVM compiled code",
        "jvm_untracked_mb": "JVM native memory it does not track",
    }
    return [
        row(
            f"serve, {label}, {result['cycles']} cycles",
            [last[key]],
            [first[key]],
            "after 20 cycles",
            unit=_UNITS.get(key, "MB"),
            lower_is_better=True,
            note=f"{result['cycles']} deploy/run/undeploy cycles in {result['seconds']:.0f} s; after cycles "
            + ", ".join(f"{k}: {m[key]:.0f}" for k, m in result["marks"].items()),
        )
        for key, label in what.items()
        if key in first and key in last
    ]
