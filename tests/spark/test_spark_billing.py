"""The paper's running example (examples/billing.cpl) on both engines: Union, Filter, Map and a
daily TIME window over a few thousand generated CDRs spanning several days."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Outputs, assert_same, assert_same_order_per_group, cdrs, chunks, run_both

pytestmark = pytest.mark.spark

BILLING = (Path(__file__).parents[2] / "examples" / "billing.cpl").read_text()


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    tmp: Path = tmp_path_factory.mktemp("billing")
    inputs = {
        "cdr1": chunks(cdrs(1600, seed=7, mean_gap_s=280), 3),
        "cdr2": chunks(cdrs(1400, seed=8, mean_gap_s=320), 3),
    }
    return run_both(spark, tmp, BILLING, inputs, ["bill", "costs", "unionout"])


def test_union(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "unionout", min_rows=3000, ordered=True)


def test_costs(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "costs", min_rows=1000, ordered=True)


def test_daily_bills(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "bill", min_rows=50, ordered=True)
    assert_same_order_per_group(*both, "bill", ["idcaller"])


def test_only_complete_days_are_billed(both: tuple[Outputs, Outputs]) -> None:
    # 4-5 days of calls: the day the input ends in is incomplete and never billed.
    ref, _ = both
    days = {r["timestamp"][:10] for r in ref["costs"]}
    callers_per_day = len(ref["bill"]) / (len(days) - 1)
    assert len(days) >= 4
    assert callers_per_day == pytest.approx(20, abs=1)
