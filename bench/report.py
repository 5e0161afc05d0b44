"""What `bench/run` prints and writes: the table of rows (medians, the range of the ratio over the
rounds), the JSON with the machine and the git revision it measured, and `--compare OLD.json`, which
prints each row's change against an earlier run's and flags those beyond both runs' spread.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def revision(repo: Path) -> str:
    """The commit measured, with "+changes" when the work tree differs from it (what was measured is
    then not that commit); "unknown" outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def document(results: list[dict[str, Any]], quick: bool, repo: Path) -> dict[str, Any]:
    return {
        "machine": machine(),
        "revision": revision(repo),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": quick,
        "results": results,
    }


def _value(r: dict[str, Any], v: float | None) -> str:
    if v is None:
        return f"{'-':>12}"
    # rows with a unit are durations (ms per micro-batch, s per run), printed with a decimal and the unit
    return ("{:>9,.1f} " + r["unit"]).format(v) if r.get("unit") else f"{v:>12,.0f}"


def _ratio(r: dict[str, Any]) -> str:
    if not r.get("ratio"):
        return f"{'-':>6} {'':>11}"
    lo_hi = r.get("ratio_spread")
    rng = f"({lo_hi[0]:.2f}-{lo_hi[1]:.2f})" if lo_hi else ""
    return f"{r['ratio']:>6.2f} {rng:>11}"


def table(doc: dict[str, Any]) -> str:
    lines = [
        f"machine: {doc['machine']}; revision {doc['revision']}; figures are medians of each side's rounds,"
        " the ratio's range is over the rounds' pairs; peak MB: resident memory of the bench, its Spark"
        " JVM, workers and servers",
        "",
        f"| {'workload':<46} | {'project':>12} | {'baseline':<34} | {'baseline':>12} | {'ratio (range)':>18} | {'peak MB':>7} |",
        f"|{'-' * 48}|{'-' * 14}|{'-' * 36}|{'-' * 14}|{'-' * 20}|{'-' * 9}|",
    ]
    for r in doc["results"]:
        if "error" in r:
            lines.append(f"| {r['workload']:<46} | failed: {r['error']}")
            continue
        bname = r.get("baseline") or "-"
        lines.append(
            f"| {r['workload']:<46} | {_value(r, r['project_events_per_s'])} | {bname:<34} |"
            f" {_value(r, r.get('baseline_events_per_s'))} | {_ratio(r)} | {r.get('peak_rss_mb', 0):>7,} |"
        )
    lines += [f"{r['workload']}: {r['note']}" for r in doc["results"] if r.get("note")]
    return "\n".join(lines)


def _key(r: dict[str, Any]) -> tuple[str, str]:
    return r["workload"], r.get("baseline") or ""


def _range(r: dict[str, Any], field: str, value: float) -> tuple[float, float]:
    lo_hi = r.get(field)
    return (lo_hi[0], lo_hi[1]) if lo_hi else (value, value)


def change(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """One row's change: the project's figure and the ratio, old and new, in per cent, and whether it
    goes beyond the noise: the two runs' ranges of the project's figure do not overlap."""
    po, pn = old.get("project_events_per_s"), new.get("project_events_per_s")
    if not po or not pn or "error" in old or "error" in new:
        return None
    lo_old, hi_old = _range(old, "project_spread", po)
    lo_new, hi_new = _range(new, "project_spread", pn)
    better = (pn < po) if new.get("unit") else (pn > po)  # durations: lower is better
    ro, rn = old.get("ratio"), new.get("ratio")
    return {
        "workload": new["workload"],
        "baseline": new.get("baseline"),
        "project_change_pct": 100 * (pn / po - 1),
        "ratio_old": ro,
        "ratio_new": rn,
        "beyond_spread": hi_new < lo_old or lo_new > hi_old,
        "better": better,
    }


def compare(old_doc: dict[str, Any], new_doc: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The per-row changes from `old_doc` to `new_doc` (rows matched by workload and baseline), as
    text and as data; rows only one of them has are listed apart."""
    old = {_key(r): r for r in old_doc.get("results", [])}
    new = {_key(r): r for r in new_doc.get("results", [])}
    lines = [
        f"against {old_doc.get('revision', 'an unrecorded revision')} ({old_doc.get('when', '?')},"
        f" {old_doc.get('machine', '?')}):",
        "",
        f"| {'workload':<46} | {'baseline':<34} | {'project':>8} | {'ratio':>13} | {'':<22} |",
        f"|{'-' * 48}|{'-' * 36}|{'-' * 10}|{'-' * 15}|{'-' * 24}|",
    ]
    changes = []
    for key, r in new.items():
        c = change(old[key], r) if key in old else None
        if c is None:
            continue
        changes.append(c)
        ratio = f"{c['ratio_old']:.2f} -> {c['ratio_new']:.2f}" if c["ratio_old"] and c["ratio_new"] else "-"
        flag = ("BETTER" if c["better"] else "WORSE") + ", beyond the spread" if c["beyond_spread"] else ""
        lines.append(
            f"| {key[0]:<46} | {key[1] or '-':<34} | {c['project_change_pct']:>+7.1f}% | {ratio:>13} | {flag:<22} |"
        )
    for label, keys in (
        ("only in the new run", new.keys() - old.keys()),
        ("only in the old run", old.keys() - new.keys()),
    ):
        lines += [f"{label}: {k[0]}" + (f" (vs {k[1]})" if k[1] else "") for k in sorted(keys)]
    return "\n".join(lines), changes


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc
