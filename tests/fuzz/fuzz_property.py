"""The fuzzer's property, for the test suite (test_fuzz.py) and for soak runs (soak.py): for every
generated case, both engines agree (fuzz_harness.check_case).

When they do not, Hypothesis shrinks the case (script and data) to a minimal one, replaying each
smaller candidate on both engines; every failing candidate is written over the same file, so when
shrinking ends the file holds the minimal case, as a pytest module ready to commit under
tests/fuzz/ (fuzz_case.regression_source).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzz_case import Case, regression_source
from fuzz_coverage import Coverage, Row
from fuzz_harness import Divergence, TooCostly, check_case
from fuzz_scripts import cases
from fuzz_watermarks import held_apart
from hypothesis import HealthCheck, Phase, given, reject, seed, settings


@dataclass
class Tally:
    """What a run of the property did."""

    runs: int = 0  # cases run on both engines, shrinking included
    found: list[Path] = field(default_factory=list)  # regression files written
    coverage: Coverage = field(default_factory=Coverage)  # of the cases that agreed
    aims: Counter[Row] = field(default_factory=Counter)  # seeds aimed at each line (soak.aimed_at)
    too_costly: int = 0  # cases the reference ran past its budget on, drawn again (fuzz_harness)
    held_apart: int = 0  # cases Spark's one watermark per query tells apart, drawn again (fuzz_watermarks)


def engines_agree(
    spark: Any,
    postgres_url: str | None,
    *,
    examples: int,
    seed_value: int,
    out_dir: Path,
    tally: Tally,
    stores: tuple[str | None, ...] = (None, "sqlite", "postgresql"),
    shrink: bool = True,
    targets: tuple[Row, ...] = (),
) -> Callable[[], None]:
    """The property as a function to call: `examples` cases drawn from `seed_value`, aimed at
    `targets` (lines of the coverage table) when given."""
    target = out_dir / f"test_found_seed{seed_value}.py"

    def on_divergence(case: Case, err: Divergence) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        what = str(err).split("\n\n--- the case ---")[0]
        target.write_text(regression_source(case, f"seed {seed_value}.\n\n{what}\n"), encoding="utf-8")
        # formatted as the project's code is, when ruff is there (the dev extra)
        subprocess.run(
            [sys.executable, "-m", "ruff", "format", "-q", str(target)], check=False, capture_output=True
        )
        if target not in tally.found:
            tally.found.append(target)

    @seed(seed_value)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[p for p in Phase if shrink or p is not Phase.shrink],
        print_blob=True,
    )
    @given(cases(stores, targets))
    def prop(case: Case) -> None:
        if held_apart(case):  # a known difference (docs/language.md, "Engines"): not a finding
            tally.held_apart += 1
            reject()
        tally.runs += 1
        tmp = Path(tempfile.mkdtemp(prefix="cep-fuzz-"))
        try:
            ref = check_case(case, spark, postgres_url, tmp)
            tally.coverage.add(case.script, ref.dead, silent(case), case.sinks)
        except Divergence as err:
            on_divergence(case, err)
            raise
        except TooCostly:
            tally.too_costly += 1
            reject()  # drawn again: not a finding (fuzz_harness.REFERENCE_BUDGET_S)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    return prop  # type: ignore[no-any-return]


def silent(case: Case) -> bool:
    """Whether a source of `case` delivers no event (no file, empty files, only rejected records)."""

    def event(line: str) -> bool:
        try:
            record = json.loads(line)
        except ValueError:
            return False
        return isinstance(record, dict) and len(record) > 1

    return any(not any(event(line) for f in files for line in f) for files in case.inputs.values())
