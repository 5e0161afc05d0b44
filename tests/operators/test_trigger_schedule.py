"""A trigger's schedule (operators.triggers) read in turns, as the engines read it (a poll at a time on
the local engine, a micro-batch of at most MOST_PER_READ ticks on Spark, a restart from the last
tick of a checkpoint): however the reads are cut, they give the ticks one read gives, in order,
none twice."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from deployer.triggers.ticks import Ticking
from operators.triggers import Trigger

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
CRONS = ["*/7 * * * * ?", "0 */5 * * * ?", "0 0 8 ? * MON-FRI", "15 10 3 L * ?", "0 0 12 ? * 2#1"]

triggers = st.one_of(
    st.builds(lambda ms: Trigger("every", every_ms=ms), st.integers(1, 3_600_000)),
    st.just(Trigger("start")),
    st.builds(lambda c: Trigger("cron", cron=c), st.sampled_from(CRONS)),
)


@settings(max_examples=150, deadline=None)
@given(
    trigger=triggers,
    start=st.integers(START, START + 86_400_000),
    cuts=st.lists(st.integers(0, 10 * 86_400_000), min_size=1, max_size=6),
    most=st.sampled_from([1, 2, 7, 50, 10_000]),
)
def test_reads_in_turns_give_the_ticks_of_one_read(
    trigger: Trigger, start: int, cuts: list[int], most: int
) -> None:
    ends = sorted(start + c for c in cuts)
    ticking = Ticking(trigger, start)
    got: list[int] = []
    capped = False
    for end in ends:
        while not capped:  # a read hands on at most `most`; the engine reads again while more is due
            first = ticking.done
            ticks = (
                ticking.due(end)
                if most >= 10_000
                else list(trigger.ticks(start, ticking.previous_ms, end, most))
            )
            if most < 10_000 and ticks:
                ticking.previous_ms, ticking.done = ticks[-1], first + len(ticks)
            if not ticks:
                break
            got += ticks
            capped = len(got) > 3_000  # a short period over days: the property holds for the prefix read
    assert got == sorted(set(got)) and all(start <= t <= ends[-1] for t in got)
    assert ticking.done == len(got)
    assert got == list(trigger.ticks(start, None, ends[-1], len(got)))  # what one read gives
    if not capped:  # and nothing due was left unread
        assert list(trigger.ticks(start, got[-1] if got else None, ends[-1], 1)) == []


def test_every_start_and_a_cron_tick_as_siddhi_and_quartz_say() -> None:
    assert list(Trigger("every", every_ms=500).ticks(0, None, 1100, 100)) == [500, 1000]  # 2 by t=1100
    assert list(Trigger("start").ticks(7, None, 10**12, 100)) == [7]
    # Quartz: a fire time at the start itself counts; whole seconds only
    assert list(Trigger("cron", cron="*/1 * * * * ?").ticks(1000, None, 3000, 100)) == [1000, 2000, 3000]
    assert list(Trigger("cron", cron="*/1 * * * * ?").ticks(1001, None, 3000, 100)) == [2000, 3000]
