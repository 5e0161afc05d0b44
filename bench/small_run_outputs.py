"""What each side of bench/small_run wrote, read back: whether a first row is visible yet (polled
while the run goes on) and all its rows as exact values, so that the two sides can be compared."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

Rows = Counter[tuple[Any, ...]]


def _bills_db(d: Path, project: bool) -> Path:
    return d / ("crm.sqlite3" if project else "bills.sqlite3")


def bills_visible(d: Path, project: bool) -> Callable[[], bool]:
    """Whether `daily_bill` has a row yet, read as another program would (read-only, never waiting
    on the writer's lock: a locked or missing table is not visible yet)."""
    uri = f"file:{_bills_db(d, project)}?mode=ro"

    def visible() -> bool:
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=0)
            try:
                return conn.execute("SELECT 1 FROM daily_bill LIMIT 1").fetchone() is not None
            finally:
                conn.close()
        except sqlite3.Error:
            return False

    return visible


def bills_written(d: Path, project: bool) -> Rows:
    """The rows of `daily_bill` as exact values: the project stores the day as SQLAlchemy's DATETIME
    text and the total as decimal text, the hand-written job as ISO text and decimal text."""
    conn = sqlite3.connect(_bills_db(d, project))
    try:
        rows = conn.execute("SELECT idcaller, day, total, calls FROM daily_bill").fetchall()
    finally:
        conn.close()
    return Counter((int(c), datetime.fromisoformat(day), Decimal(t), int(n)) for c, day, t, n in rows)


def _output_files(d: Path) -> list[Path]:
    """The finished files under `d / "out"`: the project's sink writes a hidden file and renames it,
    Spark's writer commits out of `_temporary` (and leaves `.crc` and `_SUCCESS` files beside)."""
    out = d / "out"
    if not out.is_dir():
        return []
    return [
        p
        for p in out.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(out).parts)
    ]


def files_visible(d: Path, project: bool) -> Callable[[], bool]:
    def visible() -> bool:
        try:
            return any(p.stat().st_size > 0 for p in _output_files(d))
        except OSError:  # a file renamed or removed meanwhile
            return False

    return visible


def files_written(d: Path, project: bool) -> Rows:
    """The JSON lines written, as parsed values; a timestamp as the instant it names (the project
    writes `...T00:21:36Z`, Spark's writer `...T00:21:36.000Z`)."""
    rows: Rows = Counter()
    for path in _output_files(d):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                event = json.loads(line)
                for name in ("timestamp", "t"):  # the stateless rows' event time, a match's time
                    if name in event:
                        event[name] = datetime.fromisoformat(event[name])
                rows[tuple(sorted(event.items()))] += 1
    return rows
