"""The files Spark writes in a query's checkpoint (its `metadata` and the logs `offsets`, `commits`
and `sources/K`): whether those a resumed query reads parse (`query_problems`, which the checkpoint
guard asks of every started query: deployer.spark.run.checkpoint), and what a crash leaves of an
entry being written (`drop_interrupted_log_writes`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_VERSION = re.compile(r"v\d+")


def _latest(log: Path) -> Path | None:
    """The newest file of one of Spark's logs: files are named by batch ("7", or "7.compact" for a
    file source's compacted log); dot-files are checksums and temporary files."""
    best: tuple[int, Path] | None = None
    for p in log.iterdir() if log.is_dir() else ():
        stem = p.name.removesuffix(".compact")
        if stem.isdigit() and p.is_file() and (best is None or int(stem) > best[0]):
            best = (int(stem), p)
    return best[1] if best else None


def _log_problem(path: Path, min_lines: int) -> str | None:
    """Why a log file does not parse: Spark writes a version line ("v1"), then one JSON value per line
    (an offsets file writes "-" for a source that has no offset yet)."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as err:
        return f"cannot be read ({type(err).__name__})"
    if lines and lines[-1] == "":  # a trailing newline
        lines.pop()
    if not lines or not _VERSION.fullmatch(lines[0]):
        return "is empty" if not lines else "does not start with a version line such as v1"
    for n, line in enumerate(lines[1:], start=2):
        if line == "-":
            continue
        try:
            json.loads(line)
        except ValueError:
            return f"line {n} is not JSON"
    if len(lines) < min_lines:
        return f"has {len(lines)} line(s), fewer than the {min_lines} it must have"
    return None


def query_problems(qdir: Path, query: str) -> list[str]:
    """What is wrong with the checkpoint of one started query, each naming the file."""
    if not qdir.is_dir():
        return [f"the checkpoint of {query}, {qdir}, is missing though an earlier run started it"]
    problems = []
    meta = qdir / "metadata"
    try:
        ok = isinstance(json.loads(meta.read_text(encoding="utf-8")).get("id"), str)
    except (OSError, ValueError, AttributeError):
        ok = False
    if not ok:
        problems.append(f"{meta} is {'missing' if not meta.exists() else 'truncated or unreadable'}")
    # offsets: version, batch metadata, one offset per source; commits: version, one JSON line.
    logs = [(qdir / "offsets", 3), (qdir / "commits", 2)]
    sources = qdir / "sources"
    logs += [(d, 2) for d in sorted(sources.iterdir()) if d.is_dir()] if sources.is_dir() else []
    newest: dict[str, int] = {}
    for log, min_lines in logs:
        latest = _latest(log)
        if latest is None:
            continue
        newest[log.name] = int(latest.name.removesuffix(".compact"))
        why = _log_problem(latest, min_lines)
        if why is not None:
            problems.append(f"{latest} {why} (truncated or corrupted)")
    if newest.get("commits", -1) > newest.get("offsets", -1):
        problems.append(
            f"{qdir / 'commits'} records batch {newest['commits']}, but {qdir / 'offsets'} has no file for it"
        )
    return problems


def drop_interrupted_log_writes(location: Path) -> None:
    """Remove what a crash left of a query's offsets or commits log entry being written.

    Spark writes each entry to a hidden temp file (`.0.<uuid>.tmp`) and renames it into place. A
    crash in between leaves the temp file, which Spark never reads, but which makes Spark 4 refuse,
    on every restart, a query that had not logged its first batch yet: "[STATE_STORE_CHECKPOINT_
    LOCATION_NOT_EMPTY] ... offsets should be empty on batch 0" (SIGKILL at a random point, tests/
    faults/test_materialize_kill.py, left one in the dead letters' query). Dropping it is safe: the
    entry was never written, so the batch is planned again, as after any crash before its offsets.
    """
    for log in ("offsets", "commits"):
        for partial in (location / log).glob(".*.tmp*"):
            partial.unlink(missing_ok=True)
