"""Durations and windows for the differential fuzzer: every unit the grammar takes, ADVANCE wherever
it is allowed, windows written in place or declared with CREATE WINDOW and named.

A duration is drawn as a number of milliseconds and written in one of the units that express it
exactly (`1500 ms`, `90 SECONDS`, `1 MINUTE`, `2 min`, `1 HOUR`, `1 DAY` ...), so that sizes in
seconds and minutes, which the inputs' times fall on, stay common while every spelling is met.
"""

from __future__ import annotations

from fuzz_exprs import Draw
from hypothesis import strategies as st

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

# Each unit's spellings (cpl/plan_windows.py UNITS_MS), singular and plural alike: the compiler
# takes `1 SECONDS` and `2 SECOND` as written.
UNITS = [
    (DAY, ["DAY", "DAYS"]),
    (HOUR, ["HOUR", "HOURS"]),
    (MINUTE, ["MINUTE", "MINUTES", "min"]),
    (SECOND, ["SECOND", "SECONDS", "sec"]),
    (1, ["MILLISECOND", "MILLISECONDS", "ms"]),
]

# (SIZE, ADVANCEs) in milliseconds: sizes from a quarter of a second to a day, each with advances
# that keep an event in at most some dozens of windows (the Spark plan explodes it into each).
TIME_SIZES: list[tuple[int, list[int]]] = [
    (250, [250]),
    (500, [250, 500]),
    (1500, [500, 1500]),
    (2 * SECOND, [SECOND, 2 * SECOND]),
    (10 * SECOND, [5 * SECOND, 10 * SECOND, SECOND]),
    (20 * SECOND, [10 * SECOND, 20 * SECOND]),
    (30 * SECOND, [10 * SECOND, 30 * SECOND]),
    (MINUTE, [MINUTE, 10 * SECOND, 250]),
    (90 * SECOND, [30 * SECOND, 90 * SECOND]),
    (HOUR, [HOUR, 10 * MINUTE, MINUTE]),
    (DAY, [DAY, HOUR]),
]
# The sizes the inputs' times make fire often (fuzz_inputs steps by 0.25 s to a minute).
COMMON = [1500, 2 * SECOND, 10 * SECOND, 20 * SECOND, 30 * SECOND, MINUTE]


def duration(draw: Draw, ms: int) -> str:
    """`ms` milliseconds in one of the units that write it exactly."""
    fits = [(unit, names) for unit, names in UNITS if ms % unit == 0]
    unit, names = draw(st.sampled_from(fits))
    return f"{ms // unit} {draw(st.sampled_from(names))}"


def time_spec(draw: Draw, advance: bool = True, common: bool = False) -> str:
    """A TIME window's text; `advance`: whether an ADVANCE other than SIZE may be drawn; `common`:
    one of the sizes the inputs' times close often."""
    if common or draw(st.booleans()):
        size = draw(st.sampled_from(COMMON))
        advances = next(a for s, a in TIME_SIZES if s == size)
    else:
        size, advances = draw(st.sampled_from(TIME_SIZES))
    step = draw(st.sampled_from(advances)) if advance else size
    text = f"TIME SIZE {duration(draw, size)}"
    if step != size or draw(st.integers(0, 3)) == 0:  # ADVANCE = SIZE written out, now and then
        text += f" ADVANCE {duration(draw, step)}"
    return text


def tuple_spec(draw: Draw) -> str:
    size = draw(st.integers(1, 4))
    adv = f" ADVANCE {draw(st.integers(1, 5))}" if draw(st.booleans()) else ""
    return f"TUPLE SIZE {size}{adv}"
