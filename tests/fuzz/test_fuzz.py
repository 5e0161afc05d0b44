"""The differential fuzzer's bounded run on every test run: a fixed set of seeds, a few cases each,
both engines compared on every case (docs/fuzzing.md). Long soak runs: `make fuzz`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fuzz_property import Tally, engines_agree

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

SEEDS = [101, 202, 303]
EXAMPLES = 3


@pytest.mark.parametrize("seed", SEEDS)
def test_engines_agree_on_generated_scripts(seed: int, spark: Any, postgres_url: str, tmp_path: Path) -> None:
    """On a divergence the minimal case is written to tmp_path/found as a regression test, and the
    failure shows the case and what differs."""
    tally = Tally()
    prop = engines_agree(
        spark, postgres_url, examples=EXAMPLES, seed_value=seed, out_dir=tmp_path / "found", tally=tally
    )
    prop()
    assert tally.runs >= EXAMPLES
