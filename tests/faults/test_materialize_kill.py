"""Exactly-once materialization survives SIGKILL of the Spark driver (docs/architecture.md, decision 6).

Each micro-batch of a Materialize commits its rows and a ledger row (deployment, node, batch id) in
one PostgreSQL transaction, and a batch that Spark replays after a crash finds its ledger row and
writes nothing. Here `cep run` (Spark) is killed with SIGKILL, with everything it started, at
random points of a run, ten times, and restarted from its checkpoint each time; a last run goes to
the end. The two tables it fills must then equal what the reference executor (`--engine local`)
writes from the same input into a database of its own:

- `call_log` has no primary key: rows append, so a batch written twice would show as doubled rows;
- `hourly_bill` is keyed (caller, hour): a TIME window aggregate whose state Spark keeps in its
  checkpoint, upserted, so a lost batch or lost window state would show as a missing or wrong row.

`cep run` has no option for Spark's maxFilesPerTrigger, and `--until-idle` reads the files present
when each query starts, so the input is fed a few files before every (re)start: every run reads new
input, and the kills land in micro-batches begun but not finished. What each kill hit is read from
the checkpoint (a batch whose offsets were logged but not its commit is replayed on restart) and
from the ledger (a replayed batch whose ledger row had committed must be skipped); the test asserts
that enough kills hit a batch in flight for the comparison to mean something.

Bounded by default: the runs are killed until every kind of kill has happened (at a run's first
commit, a moment after it, a few seconds after the start), two of them in a table's batch in flight
and one after a call_log batch had committed in Postgres but not in the checkpoint; then the last
run. That takes three or four kills, at most KILLS. With CEP_TEST_SOAK=1 (README, "Tests") every
run is killed, KILLS times, and more of them must hit (MIN_HITS, MIN_SKIPS).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import fault_helpers
import psycopg
import pytest
from fault_helpers import CALLS_SCRIPT, Feeder, Row, in_flight, kill_all, ledger, rows, start, tail

from cpl.compiler import compile_script
from operators import graph as g

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]


SEED = 20260101
FILES, PER_FILE, FILES_PER_RUN = 54, 70, 3  # 3,780 events over ~53 hours of event time
SOAK = os.environ.get("CEP_TEST_SOAK", "0") not in ("", "0")
KILLS = 10  # the soak's kills; the bounded test's most
IMMEDIATE = 5  # kills as soon as a run's first commit is visible
# kills that must land in a table's batch in flight, after some batches, before the last; and after
# which Spark replays a batch already committed in Postgres (one of them of call_log)
MIN_HITS, MIN_SKIPS = (5, 2) if SOAK else (2, 1)
KINDS = ("at its first commit", "after its first commit", "after the start")


# Input, processes and state: tests/faults/fault_helpers.py (shared with the other fault tests).


def generate(rnd: random.Random) -> list[list[Row]]:
    """FILES files of PER_FILE calls (see fault_helpers.generate)."""
    return fault_helpers.generate(rnd, FILES, PER_FILE)


@dataclass
class Kill:
    run: int
    plan: str
    seconds: float  # after the start of the run
    committed_before: int  # ledger rows seen just before the SIGKILL
    committed: int  # ledger rows committed when it died
    in_flight: dict[str, int]  # query -> batch begun, not committed (replayed on restart)
    skip: list[str]  # tables whose in-flight batch had committed in Postgres: the replay must skip it

    def __str__(self) -> str:
        flight = ", ".join(f"{q} #{b}" for q, b in self.in_flight.items()) or "-"
        skip = f"; ledger ahead of checkpoint: {', '.join(self.skip)}" if self.skip else ""
        return (
            f"run {self.run}: {self.plan}, killed at {self.seconds:.1f} s, ledger {self.committed_before}"
            f"->{self.committed}, in flight: {flight}{skip}"
        )


def kill_plans(rnd: random.Random) -> list[tuple[str, float]]:
    """When to kill each run, in a random order: IMMEDIATE times as soon as the run's first new
    ledger row is visible (a batch committed in Postgres whose commit Spark has most likely not
    logged yet: its replay must be skipped), the others a random time after that or after the start
    (JVM start-up, a batch begun and not committed: its replay must write it). Spare plans follow,
    for runs that end before their kill (a run whose micro-batches are fast may be done with its
    three files before a kill planned 7 s and more after its start): with them, and input enough
    for a run each (FILES), up to 8 runs may end first. The bounded test's plans begin with one of
    each kind."""
    plans = [("commit", 0.0)] * IMMEDIATE
    plans += [("commit", rnd.uniform(0.05, 2.5)) for _ in range((KILLS - IMMEDIATE) // 2)]
    plans += [("start", rnd.uniform(7.0, 15.0)) for _ in range(KILLS - len(plans))]
    rnd.shuffle(plans)
    if not SOAK:
        # One of each kind first, the bounded test may stop after them: the kill after the start
        # lands before the run's first commit (its JVM starting, or its first batch begun), whatever
        # the machine's speed, where a kill 7 s and more after it may come after a fast run's end.
        plans = [
            ("commit", 0.0),
            ("start", rnd.uniform(2.0, 6.0)),
            ("commit", rnd.uniform(0.05, 2.5)),
            *plans,
        ]
    return plans + [("commit", rnd.uniform(0.0, 2.5)) for _ in range(8)]


def kind(k: Kill) -> str:
    return next(name for name in KINDS if name in k.plan)


def enough(kills: list[Kill]) -> bool:
    """The bounded test's end: every kind of kill happened, and enough of them hit something."""
    hits = [k for k in kills if any(q.startswith("table_") for q in k.in_flight) and k.committed > 0]
    skipped = any("table_call_log" in k.skip for k in kills)
    return {kind(k) for k in kills} == set(KINDS) and len(hits) >= MIN_HITS and skipped


# ---- the test ----------------------------------------------------------------------------------------


def test_sigkill_at_random_points_loses_and_doubles_nothing(
    pg_db: str, pg_reference_db: str, tmp_path: Path
) -> None:
    files = generate(random.Random(SEED))
    plans = kill_plans(random.Random(SEED + 1))
    script = tmp_path / "calls.cpl"
    script.write_text(CALLS_SCRIPT, encoding="utf-8")
    graph = compile_script(CALLS_SCRIPT).graph
    # Materialize node id -> the checkpoint dir of its query (deployer.spark.run.deployment names it table:<name>)
    tables = {n.id: f"table_{n.table.name}" for n in graph.nodes if isinstance(n, g.Materialize)}
    assert sorted(tables.values()) == ["table_call_log", "table_hourly_bill"]

    feeder = Feeder(tmp_path / "in")
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "spark.log"
    # What a killed JVM leaves (scratch files, native libraries, artifacts) stays in tmp_path.
    env = fault_helpers.run_env(tmp_path, jvm_tmp=True)
    common = ["--source", f"calls=file:{feeder.directory}", "--until-idle"]
    spark_args = [
        str(script),
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
    chunks = [files[i : i + FILES_PER_RUN] for i in range(0, len(files), FILES_PER_RUN)]

    kills: list[Kill] = []
    finished_runs = 0
    began = time.monotonic()
    with psycopg.connect(pg_db, autocommit=True) as conn:
        for run, (plan, delay) in enumerate(plans):
            if len(kills) == KILLS or (not SOAK and enough(kills)):
                break
            if chunks:
                feeder.add(chunks.pop(0))
            before = len(ledger(conn))
            proc = start(spark_args, env, tmp_path, log)
            t0 = time.monotonic()
            seen = before
            try:
                if plan == "start":
                    while proc.poll() is None and time.monotonic() - t0 < delay:
                        time.sleep(0.01)
                    seen = len(ledger(conn))
                    how = f"{delay:.1f} s after the start"
                else:
                    while proc.poll() is None and (seen := len(ledger(conn))) == before:
                        assert time.monotonic() - t0 < 120, (
                            f"run {run} committed nothing in 120 s:\n{tail(log)}"
                        )
                        time.sleep(0.01)
                    if delay:
                        committed_at = time.monotonic()
                        while proc.poll() is None and time.monotonic() - committed_at < delay:
                            time.sleep(0.01)
                        seen = len(ledger(conn))
                    how = f"{delay:.2f} s after its first commit" if delay else "at its first commit"
                at = time.monotonic() - t0
                if proc.poll() is not None:  # it got to the end first: not a kill
                    assert proc.returncode == 0, f"run {run} failed:\n{tail(log)}"
                    finished_runs += 1
                    continue
            finally:
                kill_all(proc)
            entries = ledger(conn)
            flight = in_flight(checkpoint)
            skip = [
                q for node, q in tables.items() if q in flight and (node, f"batch:{flight[q]}") in entries
            ]
            kills.append(Kill(run, how, at, seen, len(entries), flight, skip))

        # The last run, with the rest of the input, goes to the end.
        while chunks:
            feeder.add(chunks.pop(0))
        proc = start(spark_args, env, tmp_path, log)
        last_began = time.monotonic()
        try:
            rc = proc.wait(240)
        finally:
            kill_all(proc)
        assert rc == 0, f"the last run failed ({rc}):\n{tail(log)}"
        final_entries = ledger(conn)
        last_seconds = time.monotonic() - last_began
    assert in_flight(checkpoint) == {}, "the last run left a batch unfinished"
    spark_seconds = time.monotonic() - began
    assert feeder.written == FILES

    fault_helpers.reference_run(
        script, [f"calls=file:{feeder.directory}"], [f"crm={pg_reference_db}"], tmp_path
    )

    hits = [
        k for k in kills if set(k.in_flight) & set(tables.values()) and 0 < k.committed < len(final_entries)
    ]
    skips = [k for k in kills if k.skip]
    report = "\n".join(
        [
            f"{len(kills)} kills ({len(hits)} in a table's batch in flight, {len(skips)} with a batch committed "
            f"in Postgres but not in the checkpoint), {finished_runs} runs ended before their kill; "
            f"Spark runs took {spark_seconds:.0f} s (the last one {last_seconds:.0f} s)",
            *map(str, kills),
            f"ledger rows at the end: {len(final_entries)}",
        ]
    )
    print(report)

    # The kills happened, and enough of them hit a batch in flight after some batches were committed
    # and before the last one, some of them a batch whose rows had committed: otherwise the
    # comparison below would prove little.
    assert len(kills) == KILLS if SOAK else {kind(k) for k in kills} == set(KINDS), report
    assert len(hits) >= MIN_HITS, f"only {len(hits)} kills hit a table's batch in flight\n{report}"
    assert len(skips) >= MIN_SKIPS, f"only {len(skips)} kills left a committed batch to replay\n{report}"
    assert any("table_call_log" in k.skip for k in skips), (
        f"no committed call_log batch was replayed\n{report}"
    )

    # The oracle is right: one call_log row per call of 10 s and more.
    events = [e for f in files for e in f]
    priced = sorted(e["id"] for e in events if e["duration"] >= 10)
    log_query = "SELECT id, caller, cost, ts FROM call_log"
    reference_log, spark_log = rows(pg_reference_db, log_query), rows(pg_db, log_query)
    assert sorted(r[0] for r in reference_log) == priced

    # call_log (append): the same multiset of rows; a replayed batch written again would double rows.
    doubled = sorted(r for r, n in Counter(spark_log).items() if n > 1)
    assert not doubled, f"{len(doubled)} rows written twice, e.g. {doubled[:5]}\n{report}"
    missing = sorted((Counter(reference_log) - Counter(spark_log)).elements())
    extra = sorted((Counter(spark_log) - Counter(reference_log)).elements())
    assert not missing and not extra, (
        f"call_log: {len(missing)} rows lost, e.g. {missing[:5]}; {len(extra)} unexpected, e.g. {extra[:5]}\n{report}"
    )

    # hourly_bill (upsert by caller and hour): the same row for every key.
    bill_query = "SELECT caller, hour, total, calls FROM hourly_bill"
    reference_bill = {(c, h): (t, n) for c, h, t, n in rows(pg_reference_db, bill_query)}
    spark_bill = {(c, h): (t, n) for c, h, t, n in rows(pg_db, bill_query)}
    assert len(reference_bill) >= 250, f"the reference wrote only {len(reference_bill)} hourly rows"
    wrong = {k: (reference_bill.get(k), spark_bill.get(k)) for k in reference_bill.keys() | spark_bill.keys()}
    wrong = {k: v for k, v in wrong.items() if v[0] != v[1]}
    assert not wrong, (
        f"hourly_bill: {len(wrong)} keys differ (reference, spark), e.g. {sorted(wrong.items())[:5]}\n{report}"
    )

    # Neither run dead-lettered anything: every call is valid and every row was accepted.
    for dead in (tmp_path / "spark-dead", tmp_path / "ref-dead"):
        files_ = [p for p in dead.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))]
        lines = [x for p in files_ for x in p.read_text(encoding="utf-8").splitlines()]
        assert lines == [], f"{dead.name}: {lines[:3]}"
