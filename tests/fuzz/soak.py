"""Soak run of the differential fuzzer: `make fuzz SEED=1 MINUTES=30` (or
`python tests/fuzz/soak.py --seed 1 --minutes 30`).

Starts a Spark session and a PostgreSQL server (the tests' ladder, tests/servers.py), then draws
cases from consecutive seeds, a few at a time, until the time is up, and prints what it ran. A
divergence is shrunk to a minimal case and written as a regression test under --out (default
fuzz-found/), then the run goes on with the next seed. Exit status 1 when anything was found.

Each seed's cases are aimed at the lines of the coverage table (tests/fuzz/fuzz_coverage.py) that
still have a zero (coverage-guided; `--no-aim` draws at random), and the table is printed at the end.

A Spark session that no longer answers (its JVM gone) ends the run with exit status 2: every later
case would fail alike and be written as a divergence. The seed it was on is named, to run again
alone: it may have been that seed's cases that brought the JVM down.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent.parent)]

from fuzz_property import Tally, engines_agree  # noqa: E402
from servers import start_postgres  # noqa: E402
from sessions import make_spark_session  # noqa: E402

EXAMPLES_PER_SEED = 10


def answers(spark: Any) -> bool:
    """Whether the session's JVM still answers a call."""
    try:
        spark.sparkContext._jvm.java.lang.System.currentTimeMillis()
    except Exception:
        return False
    return True


def aimed_at(tally: Tally, width: int = 5, focus: str = "") -> tuple[tuple[str, str, str], ...]:
    """The lines of the coverage table the next seed aims at: `width` of those with a zero, the ones
    aimed at least often so far first (in the table's order among equals), so that each gets cases in
    turn however the zeros shrink (a window moved along the list of zeros as it shrank skipped lines:
    the soak of seeds 1600-1652 ended with `Trigger ... / merge` never had); with `focus`,
    only the lines that name it (an operator or an upstream kind: `Pattern`, `pattern`), or whose
    operator it begins (`Aggregate`: every window; `OutputRate`: every OUTPUT clause; `Trigger`:
    every trigger), and once none of those has a zero, all of them in turn (a focused soak stays on
    its focus). Counts the aims in `tally`."""

    def wanted(row: tuple[str, str, str]) -> bool:
        return not focus or focus in row[:2] or row[0].startswith(f"{focus} ")

    gaps = [g for g in tally.coverage.gaps() if wanted(g)]
    if not gaps and focus:
        gaps = [g for g in tally.coverage.expected() if wanted(g)]
    chosen = tuple(sorted(gaps, key=lambda g: tally.aims[g])[:width])  # sorted() is stable
    tally.aims.update(chosen)
    return chosen


def _verdict(prop: Callable[[], None], kept: Path, tally: Tally) -> str:
    """What one seed's cases came to: agree, a divergence, or an error (kept whole in `kept`)."""
    try:
        prop()
    except AssertionError as err:
        return "DIVERGENCE: " + str(err).splitlines()[0][:300]
    except Exception as err:  # a generator or harness failure is a finding too
        verdict = f"ERROR {type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
        # the whole of it (a GeneratorError carries the script), to reproduce and fix
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(f"{type(err).__name__}: {err}\n")
        tally.found.append(kept)
        return verdict + f" (all of it in {kept})"
    return "agree"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1, help="the first seed (default 1)")
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to run (default 30)")
    ap.add_argument("--out", type=Path, default=Path("fuzz-found"), help="where regression tests go")
    ap.add_argument("--no-shrink", action="store_true", help="write a divergence as found, unshrunk")
    ap.add_argument(
        "--no-aim",
        action="store_true",
        help="draw cases at random only (by default each seed aims its cases at the coverage table's zeros)",
    )
    ap.add_argument(
        "--focus",
        default="",
        help="aim only at the coverage lines of this operator or upstream kind (e.g. Pattern, pattern, "
        "OutputRate: every OUTPUT form, Trigger: every trigger kind and what reads it)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    print("starting Spark and PostgreSQL ...", flush=True)
    work = Path(tempfile.mkdtemp(prefix="cep-fuzz-"))
    # One session runs every case for the whole soak, and its driver's heap grows with the queries
    # it has run: with Spark's default 1g a 30-minute soak ran out of it after some 130 cases.
    spark = make_spark_session(
        work / "warehouse", app="paascep-fuzz", log=work / "spark.log", driver_memory="4g"
    )
    print(f"spark log: {work / 'spark.log'}", flush=True)
    spark.sparkContext.setLogLevel("OFF")  # a stopped query's cancelled job logs an error
    postgres = start_postgres()
    tally = Tally()
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()
    current = args.seed
    lost = False
    try:
        while time.monotonic() < deadline:
            before = tally.runs
            prop = engines_agree(
                spark,
                postgres.url,
                examples=EXAMPLES_PER_SEED,
                seed_value=current,
                out_dir=args.out,
                tally=tally,
                shrink=not args.no_shrink,
                targets=() if args.no_aim else aimed_at(tally, focus=args.focus),
            )
            verdict = _verdict(prop, args.out / f"error_seed{current}.txt", tally)
            elapsed = time.monotonic() - started
            print(
                f"[{elapsed / 60:5.1f} min] seed {current}: {tally.runs - before} cases, {verdict}",
                flush=True,
            )
            if not verdict.startswith("agree") and not answers(spark):
                print(
                    f"soak: the Spark session no longer answers (log: {work / 'spark.log'}); stopping. "
                    f"Seed {current}'s finding may be that loss: run it alone with --seed {current}.",
                    flush=True,
                )
                lost = True
                break
            current += 1
    finally:
        postgres.stop()
        if answers(spark):
            spark.stop()
    last = current if lost else current - 1
    print(tally.coverage.table())
    print(
        f"soak: seeds {args.seed}..{last}, {tally.runs} cases on both engines in "
        f"{(time.monotonic() - started) / 60:.1f} min; {len(tally.found)} divergence(s); "
        f"{tally.too_costly} case(s) past the reference's budget, drawn again; "
        f"{tally.held_apart} held apart by Spark's watermark per query, drawn again"
        + "".join(f"\n  {p}" for p in tally.found)
    )
    return 2 if lost else 1 if tally.found else 0


if __name__ == "__main__":
    sys.exit(main())
