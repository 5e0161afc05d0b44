"""The input of the hand-written differential tests (test_patterns_on_both_engines.py,
test_output_on_both_engines.py): events of a key `k` and a value `v`, in four files."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def keyed_stream(rng: random.Random, n: int, disorder: bool) -> list[list[str]]:
    """n events 0 to 800 ms apart (some at equal times), keys 1 to 3, in four files; with
    `disorder`, neighbours swapped when less than a second apart (within a WATERMARK of 1 second,
    so none is late)."""
    t = 0
    events = []
    for _ in range(n):
        t += rng.choice([0, 100, 200, 300, 500, 800])
        events.append((t, rng.randint(1, 3), rng.randint(0, 9)))
    if disorder:
        for i in range(0, n - 1, 3):
            if events[i + 1][0] - events[i][0] < 1000:
                events[i], events[i + 1] = events[i + 1], events[i]
    lines = [
        json.dumps(
            {"k": k, "v": v, "ts": (T0 + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")}
        )
        for ms, k, v in events
    ]
    q = -(-n // 4)
    return [lines[i : i + q] for i in range(0, n, q)]
