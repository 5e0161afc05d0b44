"""Pattern workloads: FROM PATTERN through the project on Spark and on the reference executor, against
a hand-written `applyInPandasWithState` job, and how the work per event holds up as partial matches
pile up (bench/pattern_baseline has the inputs and the baseline).

Spark reads `rate-micro-batch` (a fixed number of events per micro-batch, not capped by a clock) and
writes to the noop sink; an observation counts each micro-batch's matches. Throughput is events over
the wall time of `batches` micro-batches after `warm` ones (which include the first WITHIN's worth
of events: the state is full before anything is timed). The reference executor is fed the same events
as tuples in this process; its figure is the events pushed after the warm-up over the time taken.
The project's and the baseline's matches are compared at every event count both reached: a
difference fails the row.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pattern_baseline import (
    EQUALITY,
    RANGE,
    Feed,
    count_matches,
    flat_feed,
    hand_pattern,
    main_feed,
    quiet_feed,
    range_feed,
    script,
)
from pattern_ceiling import PROCESSORS, ReadOnly, api_job
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from cpl.compiler import compile_script
from deployer.local.executor import LocalExecutor
from deployer.spark.handlers import spark_graph
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ, named

Build = Callable[[SparkSession, int], DataFrame]
MATCHES = "pattern_matches"
WAIT_LIMIT_S = 900.0  # a query that gets no further in this long fails its row


@dataclass(frozen=True)
class Sizes:
    keys: int  # the 3-step workload's callers
    step_us: int  # event time between two events (all callers)
    rows: int  # its events per micro-batch
    batches: int  # micro-batches measured, after the warm-up
    rounds: int  # interleaved rounds of the project and the baseline (median)
    local_events: int  # the reference executor's measured events, after the warm-up
    many: int  # partials per key of the flatness rows (against 10)
    range_many: int  # partials per key of the range rows (against 10)
    state_keys: int
    state_events: int


# The full sizes take about 15 minutes in all on this machine when it is quiet (the quick ones
# about 6), twice or three times that under other people's Spark tests; the state row (1,000,000
# events over 100,000 keys) and the 3-step rows (both jobs at 10,000 keys) cost most.
FULL = Sizes(10_000, 24_000, 25_000, 2, 3, 75_000, 10_000, 1_000, 100_000, 1_000_000)
QUICK = Sizes(10_000, 24_000, 25_000, 1, 1, 50_000, 2_000, 500, 10_000, 50_000)
WITHIN = "10 MINUTES"
WITHIN_US = 600_000_000
FLAT_KEYS = 4
FLAT_STEP_US = 100_000  # 400 ms between two events of a key


def project_pattern(text: str, feed: Feed) -> Build:
    """The script's pattern as `cep run` plans it, over `feed`'s events (as bench/spark_workloads'
    `project_job`: the generated events are in order, so they pass no Sequencer)."""
    graph = compile_script(text).graph
    src = graph.sources()[0]

    def build(spark: SparkSession, rows: int) -> DataFrame:
        df = feed.frame(spark, rows)
        df = df.select(*[F.col(f.name).alias(col_name(i)) for i, f in enumerate(src.schema)], SEQ)
        ts = col_name(src.schema.position(src.event_time or "ts"))
        df = df.withWatermark(ts, f"{src.watermark_ms or 0} milliseconds")
        sg = spark_graph(graph, {src.stream: df})
        return named(sg.port(graph.streams["m"]), graph.stream_schema("m"))

    return build


def start(spark: SparkSession, build: Build, rows: int, checkpoint: str) -> StreamingQuery:
    df = build(spark, rows).observe(MATCHES, F.count(F.lit(1)).alias("n"))
    w = df.writeStream.format("noop").option("checkpointLocation", checkpoint)
    return w.trigger(processingTime="0 seconds").start()


def last(q: StreamingQuery) -> dict[str, Any]:
    p = q.lastProgress
    assert p is not None
    return p


def until(q: StreamingQuery, batch: int) -> None:
    """Wait until micro-batch `batch` is done."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while q.lastProgress is None or q.lastProgress["batchId"] < batch:
        if q.exception():
            raise RuntimeError(str(q.exception()))
        if time.monotonic() > deadline:
            raise RuntimeError(f"micro-batch {batch} not done in {WAIT_LIMIT_S:.0f} s")
        time.sleep(0.05)


def counted(progress: Sequence[dict[str, Any]]) -> dict[int, int]:
    """Matches so far at each micro-batch's end, by the events read so far."""
    out: dict[int, int] = {}
    rows = matches = 0
    for p in sorted(progress, key=lambda p: p["batchId"]):
        rows += p["numInputRows"]
        observed = (p.get("observedMetrics") or {}).get(MATCHES)  # a Row
        matches += observed["n"] if observed is not None else 0
        out[rows] = matches
    return out


def measure(spark: SparkSession, build: Build, rows: int, warm: int, batches: int) -> dict[str, Any]:
    """Events/s of `batches` micro-batches after micro-batches 0..warm-1, the matches so far at each
    micro-batch's end, and the last progress's state operator."""
    with tempfile.TemporaryDirectory() as tmp:
        q = start(spark, build, rows, tmp)
        try:
            until(q, warm - 1)
            first = last(q)["batchId"]
            t0 = time.perf_counter()
            until(q, first + batches)
            elapsed = time.perf_counter() - t0
            progress = q.recentProgress
        finally:
            q.stop()
    done = sum(p["numInputRows"] for p in progress if first < p["batchId"] <= first + batches)
    return {
        "events_per_s": done / elapsed,
        "matches": counted(progress),
        "state": progress[-1]["stateOperators"],
    }


def same_matches(project: dict[int, int], baseline: dict[int, int], what: str) -> int:
    """The matches at the most events both counted; a difference at any count is an error."""
    common = sorted(set(project) & set(baseline))
    wrong = [(n, project[n], baseline[n]) for n in common if project[n] != baseline[n]]
    if wrong:
        n, p, b = wrong[0]
        raise AssertionError(f"{what}: after {n:,} events the project found {p:,} matches, {b:,} expected")
    if not common or project[common[-1]] == 0:
        raise AssertionError(f"{what}: nothing to compare (no matches)")
    return common[-1]


def local_rate(text: str, feed: Feed, warm: int, events: int) -> dict[str, Any]:
    """The reference executor over `feed`'s first warm + events events: events/s of the last
    `events`, and all the matches."""
    graph = compile_script(text).graph
    first, then = feed.events(0, warm), feed.events(warm, warm + events)
    matches = 0

    def out(stream: str, event: Any) -> None:
        nonlocal matches
        matches += stream == "m"

    ex = LocalExecutor(graph, on_output=out)
    ex.push_all("cdr", first)
    t0 = time.perf_counter()
    ex.push_all("cdr", then)
    elapsed = time.perf_counter() - t0
    ex.finish()
    return {"events_per_s": events / elapsed, "matches": matches, "events": first + then}


def row(name: str, project: float, baseline: str | None, base: float | None, **extra: Any) -> dict[str, Any]:
    return {
        "workload": name,
        "project_events_per_s": project,
        "baseline": baseline,
        "baseline_events_per_s": base,
        "ratio": project / base if base else None,
        **extra,
    }


def three_steps(spark: SparkSession, s: Sizes) -> list[dict[str, Any]]:
    """Rows 1 and 2: 10,000 callers through the project on Spark, by hand, and the reference executor."""
    feed = main_feed(s.keys, s.step_us, 10)
    window = WITHIN_US // s.step_us  # the events of one WITHIN: the state is full after them
    warm = -(-window // s.rows) + 1
    text = script(EQUALITY, WITHIN)
    sides = {"p": project_pattern(text, feed), "b": hand_pattern(feed, WITHIN_US)}
    runs: dict[str, list[dict[str, Any]]] = {"p": [], "b": []}
    for r in range(s.rounds):  # interleaved, each side first in every other round
        for side in "pb" if r % 2 == 0 else "bp":
            runs[side].append(measure(spark, sides[side], s.rows, warm, s.batches))
            print(f"  three steps, {side}{r}: {runs[side][-1]['events_per_s']:,.0f}/s", file=sys.stderr)
    compared = same_matches(runs["p"][0]["matches"], runs["b"][0]["matches"], "3-step pattern")
    p = statistics.median(x["events_per_s"] for x in runs["p"])
    b = statistics.median(x["events_per_s"] for x in runs["b"])
    local = local_rate(text, feed, window, s.local_events)
    expected = count_matches(local["events"], WITHIN_US)
    if local["matches"] != expected:
        raise AssertionError(f"reference executor: {local['matches']:,} matches, {expected:,} expected")
    on_spark = runs["p"][0]["matches"].get(len(local["events"]))
    if on_spark is not None and on_spark != expected:
        raise AssertionError(f"Spark: {on_spark:,} matches in the first {len(local['events']):,} events")
    k = f"{s.keys // 1000}k keys"
    batch = f"{s.rows:,} events/micro-batch ({s.rows / s.keys:g} per key), {warm} warm-up + {s.batches} timed"
    return [
        row(
            f"pattern 3-step, {k}, Spark",
            p,
            "applyInPandasWithState, by hand",
            b,
            note=f"{batch}, median of {s.rounds} rounds; same matches ({runs['p'][0]['matches'][compared]:,}"
            f" in the first {compared:,} events)",
        ),
        row(
            f"pattern 3-step, {k}, reference executor",
            local["events_per_s"],
            "the project on Spark (row above)",
            p,
            note=f"{s.local_events:,} events after {window:,}; {local['matches']:,} matches, as by hand",
        ),
    ]


def under_the_api(spark: SparkSession, s: Sizes, three: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The project's 3-step row (`three`, from `three_steps`) against what Spark's stateful API costs
    by itself on the same input (bench/pattern_ceiling), and the same at ten times the events per
    micro-batch, where each key's share of the API's per-key cost is spread over ten times the events."""
    if "error" in three[0]:
        raise RuntimeError("no 3-step row to compare")
    feed = main_feed(s.keys, s.step_us, 10)
    k = f"{s.keys // 1000}k keys"
    project = three[0]["project_events_per_s"]
    out = []
    for label, processor in PROCESSORS.items():
        api = measure(spark, api_job(feed, processor), s.rows, 2, s.batches)["events_per_s"]
        print(f"  transformWithState that {label}: {api:,.0f}/s", file=sys.stderr)
        out.append(
            row(
                f"pattern 3-step, {k}, Spark, against the API",
                project,
                f"transformWithState that {label}",
                api,
                note=f"{s.rows:,} events/micro-batch, as the 3-step row; no matching: Spark's own cost",
            )
        )
    big = 10 * s.rows
    warm = -(-(WITHIN_US // s.step_us) // big) + 1
    text = script(EQUALITY, WITHIN)
    p = measure(spark, project_pattern(text, feed), big, warm, s.batches)["events_per_s"]
    api = measure(spark, api_job(feed, ReadOnly), big, 2, s.batches)["events_per_s"]
    label = f"pattern 3-step, {k}, {big // s.keys} events per key per micro-batch, Spark"
    return [
        *out,
        row(
            label,
            p,
            "transformWithState that reads each key's rows",
            api,
            note=f"{big:,} events/micro-batch, {warm} warm-up + {s.batches} timed",
        ),
    ]


def partials(spark: SparkSession, link: str, many: int, rows: int) -> list[dict[str, Any]]:
    """Rows 3 and 4: the same pattern with `many` and with 10 partials open per key (WITHIN holds
    that many of a key's events), on both engines; ratio = many / 10."""
    feeds = range_feed if link == RANGE else flat_feed
    measured = 2 * rows
    got: dict[str, dict[int, float]] = {"spark": {}, "local": {}}
    notes = []
    for n in (10, many):
        feed = feeds(FLAT_KEYS, n, FLAT_STEP_US)
        text = script(link, f"{n * FLAT_KEYS * FLAT_STEP_US // 1000} MILLISECONDS")
        warm = -(-n * FLAT_KEYS // rows) + 1  # micro-batches: the first WITHIN's events, and one more
        fill = (warm - 1) * rows  # the reference executor's warm-up: as many events
        local = local_rate(text, feed, fill, measured)
        spark_run = measure(spark, project_pattern(text, feed), rows, warm, measured // rows)
        on_spark = spark_run["matches"].get(fill + measured)
        if on_spark is not None and on_spark != local["matches"]:
            raise AssertionError(f"{n} partials: Spark {on_spark:,} matches, reference {local['matches']:,}")
        got["spark"][n], got["local"][n] = spark_run["events_per_s"], local["events_per_s"]
        notes.append(f"{n:,}: {local['matches']:,} matches in {fill + measured:,} events")
        print(f"  {link}, {n} partials: done", file=sys.stderr)
    kind = "range link" if link == RANGE else "equality link"
    name = f"pattern {kind}, {many:,} vs 10 partials"
    detail = f"{FLAT_KEYS} keys; {'; '.join(notes)}"
    out = []
    for engine, label, note in (
        ("spark", "Spark", f"{detail}; Spark: {rows:,} events/micro-batch"),
        ("local", "reference executor", f"{detail}; reference executor: {measured:,} events timed"),
    ):
        r = got[engine]
        # both links are flat now: an equality looks up its value, a range bisects the sorted partials
        verdict = "within 2x" if r[many] * 2 >= r[10] else "NOT within 2x"
        out.append(
            row(
                f"{name}, {label}", r[many], "the same, 10 partials per key", r[10], note=f"{note}; {verdict}"
            )
        )
    return out


def state(spark: SparkSession, s: Sizes, memory: Any) -> list[dict[str, Any]]:
    """Row 5: the state after `state_events` events over `state_keys` callers (the 3-step pattern, the
    WITHIN about as long as the input), and again once they went quiet for longer than WITHIN."""
    step = WITHIN_US // s.state_events
    feed = quiet_feed(s.state_keys, s.state_events, step, WITHIN_US)
    rows = s.state_events // 4
    with tempfile.TemporaryDirectory() as tmp, memory() as mem:
        q = start(spark, project_pattern(script(EQUALITY, WITHIN), feed), rows, tmp)
        try:
            until(q, 0)
            t0 = time.perf_counter()
            until(q, 3)  # the 4 micro-batches of the busy callers
            rate = 3 * rows / (time.perf_counter() - t0)
            peak = mem.peak_mb
            # quiet: the watermark passes every busy caller's WITHIN (its timers fire in the micro-batch
            # after the first of other callers), and a few more micro-batches
            until(q, 7)
            after = mem._sample() / 1024  # resident now, once the busy callers' state is gone
            busy, quiet = (
                next(p for p in q.recentProgress if p["batchId"] == b)["stateOperators"][0] for b in (3, 7)
            )
        finally:
            q.stop()
    dropped = quiet["numRowsTotal"] <= busy["numRowsTotal"] // 100
    timers = [x["customMetrics"].get("rocksdbNumInternalColFamiliesKeys") for x in (busy, quiet)]
    mb = 1024 * 1024
    return [
        row(
            f"pattern state, {s.state_events // 1000}k events/{s.state_keys // 1000}k keys, Spark",
            rate,
            None,
            None,
            state_rows_busy=busy["numRowsTotal"],
            state_bytes_busy=busy["memoryUsedBytes"],
            state_rows_quiet=quiet["numRowsTotal"],
            state_bytes_quiet=quiet["memoryUsedBytes"],
            timer_keys_busy=timers[0],
            timer_keys_quiet=timers[1],
            peak_busy_mb=round(peak),
            resident_quiet_mb=round(after),
            state_dropped=dropped,
            note=f"state rows {busy['numRowsTotal']:,} (memoryUsedBytes {busy['memoryUsedBytes'] / mb:,.1f} MB,"
            f" timer keys {timers[0]}) after the busy callers; {quiet['numRowsTotal']:,}"
            f" ({quiet['memoryUsedBytes'] / mb:,.1f} MB, timer keys {timers[1]}) once quiet past WITHIN:"
            f" {'dropped' if dropped else 'DID NOT DROP'}; peak memory {peak:,.0f} MB while busy, {after:,.0f} MB"
            " resident once quiet (the JVM keeps the heap it grew);"
            f" {rows:,} events/micro-batch",
        )
    ]


def guarded(name: str, rows: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows, or one failed row: a failure (a difference in matches too) is not a figure."""
    try:
        out = rows()
    except Exception as err:
        print(f"  {name}: FAILED: {err}", file=sys.stderr)
        return [{"workload": name, "error": (str(err).splitlines() or [repr(err)])[0][:200]}]
    print(f"  {name}: done", file=sys.stderr)
    return out


def run(quick: bool, log: Path, memory: Any) -> list[dict[str, Any]]:
    """Every pattern row (bench/run --only patterns); `memory`: bench/run's TreeMemory."""
    from deployer.spark.run.session import spark_session

    os.environ.setdefault("CEP_SHUFFLE_PARTITIONS", "2")
    spark = spark_session("local[2]", "paascep-bench", log=log)
    s = QUICK if quick else FULL
    try:
        three = guarded("pattern 3-step", lambda: three_steps(spark, s))
        return [
            *three,
            *guarded("pattern API ceiling", lambda: under_the_api(spark, s, three)),
            *guarded("pattern flatness", lambda: partials(spark, EQUALITY, s.many, 20_000)),
            *guarded("pattern range link", lambda: partials(spark, RANGE, s.range_many, 2_400)),
            *guarded("pattern state", lambda: state(spark, s, memory)),
        ]
    finally:
        spark.stop()
