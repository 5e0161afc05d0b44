"""A soak aims its seeds at every line of the coverage table that has a zero, in turn: each line is
aimed at once before any is aimed at twice, however the zeros shrink between seeds (a window moved
along the shrinking list skipped lines, which then were never aimed at). No engine runs here."""

from __future__ import annotations

import random

from fuzz_property import Tally
from soak import aimed_at


def _seeds(tally: Tally, n: int, focus: str = "", covered_per_seed: int = 0) -> list[tuple[str, str, str]]:
    """The lines `n` seeds aim at; after each, `covered_per_seed` random zeros are had (as cases
    that happen to reach them would), besides nothing of what was aimed at."""
    rng = random.Random(5)
    aimed: list[tuple[str, str, str]] = []
    for _ in range(n):
        aimed.extend(aimed_at(tally, focus=focus))
        gaps = tally.coverage.gaps()
        for row in rng.sample(gaps, min(covered_per_seed, len(gaps))):
            tally.coverage.had[row] += 1
            tally.coverage.failed[row] += 1
    return aimed


def test_every_zero_is_aimed_at_before_any_twice() -> None:
    tally = Tally()
    lines = tally.coverage.expected()
    rounds = -(-len(lines) // 5)
    aimed = _seeds(tally, rounds)
    assert len(set(lines)) == len(lines)
    assert sorted(aimed[: len(lines)]) == sorted(lines)  # each once, none left out


def test_zeros_that_shrink_between_seeds_are_all_aimed_at() -> None:
    tally = Tally()
    aimed = set(_seeds(tally, 53, covered_per_seed=3))
    never = [row for row in tally.coverage.gaps() if row not in aimed]
    assert not never, f"zeros never aimed at: {never[:5]}"


def test_a_focus_stays_on_its_lines_and_goes_round_them() -> None:
    tally = Tally()
    triggers = [r for r in tally.coverage.expected() if r[0].startswith("Trigger ")]
    assert ("Trigger EVERY", "merge", "-") in triggers
    aimed = _seeds(tally, -(-len(triggers) // 5) * 2, focus="Trigger")
    assert set(aimed) == set(triggers)
    assert max(aimed.count(r) for r in triggers) - min(aimed.count(r) for r in triggers) <= 1
