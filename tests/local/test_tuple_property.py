"""Property: TUPLE windows with ADVANCE = SIZE partition each group's events exactly."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=100, deadline=None)
@given(
    size=st.integers(1, 5),
    events=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(-100, 100)), max_size=60),
)
def test_tumbling_tuple_windows_partition_the_input(run, size: int, events: list) -> None:
    script = f"""
    CREATE STREAMSCHEMA s WITH k varchar, v integer;
    INSERT INTO o SELECT k, count(*) AS n, sum(v) AS total
      FROM s WINDOW TUPLE SIZE {size} ADVANCE {size} GROUP BY k;
    """
    out = run(script, [("s", e) for e in events]).outputs["o"]
    per_group = Counter(k for k, _ in events)
    counted: Counter = Counter()
    summed: Counter = Counter()
    for k, n, total in out:
        assert n == size  # only full windows fire
        counted[k] += n
        summed[k] += total
    for k, n in per_group.items():
        full = (n // size) * size
        assert counted[k] == full
        # the windows hold exactly the group's first `full` events, each once
        values = [v for kk, v in events if kk == k][:full]
        assert summed[k] == sum(values)
