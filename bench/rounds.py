"""Rounds of a measurement and what a row reports of them: the median of at least three interleaved
rounds of each side, with their spread, so that a change between two runs can be told from noise
(`bench/run --compare`).

A row's figures are the medians of each side's rounds; its ratio is the ratio of those medians, and
its ratio's spread the lowest and highest ratio of one round's pair (each round measures both sides
back to back, so a swing of the machine moves both of a pair alike).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

ROUNDS = 3  # the fewest rounds a row's median is taken over


def alternating(
    rounds: int, baseline: Callable[[str], Any], project: Callable[[str], Any]
) -> tuple[list[Any], list[Any]]:
    """`rounds` measurements of each side (given a round's tag), interleaved and each side first in
    every other round: neither profits from running second (the JVM's JIT warms up over the first
    rounds). Returns (baseline's, project's)."""
    bs: list[Any] = []
    ps: list[Any] = []
    for r in range(rounds):
        sides = [(f"b{r}", baseline, bs), (f"p{r}", project, ps)]
        for tag, run, got in sides if r % 2 == 0 else sides[::-1]:
            got.append(run(tag))
    return bs, ps


def spread(values: Sequence[float]) -> dict[str, Any]:
    """The median of `values` and their range: {median, low, high, rounds}."""
    return {
        "median": statistics.median(values),
        "low": min(values),
        "high": max(values),
        "rounds": len(values),
    }


def row(
    workload: str,
    project: Sequence[float],
    baseline: Sequence[float] | None,
    baseline_name: str | None,
    *,
    unit: str | None = None,
    lower_is_better: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """A bench row from each side's rounds (paired by index): the medians, their spreads, and the
    ratio (project over baseline for rates; baseline over project when `lower_is_better`, as for
    durations: above 1 the project is faster either way) with the range of the rounds' ratios."""
    p = spread(project)
    out: dict[str, Any] = {
        "workload": workload,
        "project_events_per_s": p["median"],
        "project_spread": [p["low"], p["high"]],
        "rounds": p["rounds"],
        "baseline": baseline_name,
        "baseline_events_per_s": None,
        "ratio": None,
    }
    if unit is not None:
        out["unit"] = unit
    if baseline:
        b = spread(baseline)

        def ratio(pv: float, bv: float) -> float | None:
            num, den = (bv, pv) if lower_is_better else (pv, bv)
            return num / den if den else None

        pairs = [r for pv, bv in zip(project, baseline, strict=False) if (r := ratio(pv, bv)) is not None]
        out |= {
            "baseline_events_per_s": b["median"],
            "baseline_spread": [b["low"], b["high"]],
            "ratio": ratio(p["median"], b["median"]),
            "ratio_spread": [min(pairs), max(pairs)] if pairs else None,
        }
    return out | extra
