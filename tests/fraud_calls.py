"""Crafted call records for examples/fraud.cpl and what it must find in them, shared by
tests/local/test_fraud_example.py and tests/spark/test_spark_fraud_example.py. The same calls are
examples/fraud_calls/cdr.jsonl, which README.md ("Detecting patterns") runs the example on.

The rule (examples/fraud.cpl): three or more calls by one caller to distinct receivers, then a call
longer than 3600 s, the long call at most 10 minutes after the first; one row per such long call in
`suspicious_calls`, with the caller's plan (bench/cdr.py plans: idplan = 1 + idcaller % 4, callers
from 1 up; caller 4242 has none).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fraud.cpl"
EXAMPLE_CALLS = Path(__file__).resolve().parents[1] / "examples" / "fraud_calls"
START = datetime(2026, 1, 1, 9, tzinfo=UTC)


def t(minutes: float) -> datetime:
    return START + timedelta(minutes=minutes)


# (idcaller, idreceiver, duration in s, minutes after 09:00)
CALLS = [
    # 1: fraud: 101, 102, 103, then a 4000 s call at 09:06
    (1, 101, 60, 0),
    (1, 102, 45, 2),
    (1, 103, 30, 4),
    (1, 104, 4000, 6),
    # 1 again two hours later: a second row for the same caller
    (1, 111, 20, 120),
    (1, 112, 20, 121),
    (1, 113, 20, 122),
    (1, 114, 3700, 125),
    # 2: only two distinct receivers, back and forth, then a long call: no match
    (2, 201, 60, 0),
    (2, 202, 60, 1),
    (2, 201, 60, 2),
    (2, 202, 60, 3),
    (2, 201, 5000, 4),
    # 3: three distinct receivers, but the long call 10 min 1 s after the first: no match (from the
    # second call on, the long call is only the third distinct receiver, not a call after three)
    (3, 301, 60, 0),
    (3, 302, 60, 1),
    (3, 303, 60, 2),
    (3, 304, 5000, 10 + 1 / 60),
    # 4: the long call exactly 10 minutes after the first: a match (WITHIN includes its bound)
    (4, 401, 60, 0),
    (4, 402, 60, 1),
    (4, 403, 60, 2),
    (4, 404, 5000, 10),
    # 5: the "long" call lasts exactly one hour, not longer: no match
    (5, 501, 60, 0),
    (5, 502, 60, 1),
    (5, 503, 60, 2),
    (5, 504, 3600, 3),
    # 6: the long call comes first, the distinct receivers after it: no match
    (6, 601, 7200, 0),
    (6, 602, 60, 1),
    (6, 603, 60, 2),
    (6, 604, 60, 3),
    # 7: repeats in between, five calls before the long one: matches from its first four calls
    # (from 701, 701, 702 and 701 again), all with the same long call: one row
    (7, 701, 60, 0),
    (7, 701, 60, 1),
    (7, 702, 60, 2),
    (7, 701, 60, 3),
    (7, 703, 60, 4),
    (7, 704, 60, 5),
    (7, 705, 5400, 6),
    # 8: two receivers, then a long call; caller 9 calls a third receiver in between, which does
    # not count for caller 8 (one automaton per caller): no match
    (8, 801, 60, 0),
    (8, 802, 60, 1),
    (9, 901, 60, 2),
    (8, 803, 4000, 3),
    # 4242: fraud by a caller without a plan: kept, idplan NULL (ON OUTER SQL)
    (4242, 11, 10, 30),
    (4242, 12, 10, 31),
    (4242, 13, 10, 32),
    (4242, 14, 9000, 33),
]

# suspicious_calls: (idcaller, call_time, idreceiver, duration, idplan), ordered by key
TABLE = [
    (1, t(6), 104, 4000, 2),
    (1, t(125), 114, 3700, 2),
    (4, t(10), 404, 5000, 1),
    (7, t(6), 705, 5400, 4),
    (4242, t(33), 14, 9000, None),
]

# the `suspects` stream: (idcaller, first_call, calls, call_time), in the order of the matches
SUSPECTS = [
    (1, t(0), 3, t(6)),
    (7, t(0), 4, t(6)),  # 701 then 702, 703, 704 (701 again is the first call's receiver)
    (7, t(1), 4, t(6)),
    (7, t(2), 4, t(6)),  # 702 then 701, 703, 704
    (7, t(3), 3, t(6)),  # 701 then 703, 704
    (4, t(0), 3, t(10)),
    (4242, t(30), 3, t(33)),
    (1, t(120), 3, t(125)),
]


def records() -> list[dict[str, object]]:
    """CALLS as input records, in event-time order (a caller's calls stay in their order)."""
    ordered = sorted(CALLS, key=lambda c: c[3])
    return [
        {
            "idcaller": c,
            "idreceiver": r,
            "duration": d,
            "timestamp": t(m).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        for c, r, d, m in ordered
    ]


def jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def write_calls(directory: Path, files: int = 1) -> None:
    """The records in `files` JSON-lines files of about equal size, named in time order."""
    rows = records()
    directory.mkdir(parents=True, exist_ok=True)
    size = -(-len(rows) // files)
    for i in range(files):
        (directory / f"cdr-{i:02d}.jsonl").write_text(jsonl(rows[i * size : (i + 1) * size]))


def as_utc(value: object) -> datetime:
    """A timestamp as a store gives it back: SQLite's text, PostgreSQL's datetime (naive = UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime), value
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
