"""Cases drawn as a soak draws them, for the tests that check what the generator draws
(test_generator_draws_*.py): generation only, no engine run."""

from __future__ import annotations

from fuzz_case import Case
from fuzz_coverage import Row
from fuzz_scripts import cases
from hypothesis import HealthCheck, Phase, given, seed, settings


def drawn_cases(
    n: int,
    targets: tuple[Row, ...],
    *,
    first_seed: int,
    per_seed: int = 3,
    one_target_per_seed: bool = True,
    stores: tuple[str | None, ...] = (None, "sqlite"),
) -> list[Case]:
    """`n` cases, a few per seed (one seed's examples are variations of each other: many seeds give
    the variety a soak's consecutive seeds have). Aimed at `targets` (lines of the coverage table)
    when there are any: each seed's at one of them in turn, or each case at any of them."""
    out: list[Case] = []
    for k in range(-(-n // per_seed)):
        aimed = (targets[k % len(targets)],) if targets and one_target_per_seed else targets

        @seed(first_seed + k)
        @settings(
            max_examples=per_seed,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(cases(stores=stores, targets=aimed))
        def draw(case: Case) -> None:
            out.append(case)

        draw()
    return out
