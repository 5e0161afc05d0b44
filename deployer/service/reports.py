"""What the service writes to the catalog about a deployment: its errors on one line, redacted, and
its counters, summed from its queries' progress reports.

Counters (per streaming query, persisted in `progress` so a restart neither loses nor counts twice):
- events in: records read from each input (the least any query of the deployment has read of it:
  every query reads its inputs itself);
- events out: rows written to the sinks and tables (Spark's observed metrics on each output);
- last batch: the newest micro-batch id that ran, and when;
- lag: how long the newest micro-batch with input took from its start to its output, the delay an
  event waits at most once its batch has started (the slowest of the deployment's queries).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from deployer.spark.metrics import batch_counts

# The observed metric counting the rows each sink and table query writes (deployer.service.spark_runs).
OUT_METRIC = "cep_out"

_EXC_LINE = re.compile(r"^\s*((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): (.+)$")
_FRAMEWORK = ("pyspark.", "py4j.", "org.apache.spark", "java.", "scala.", "Py4J")
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^:@/\s]*):[^@/\s]+@")
_PASSWORD_OPTION = re.compile(r"(password=)[^&\s]+", re.I)


def redact(text: str) -> str:
    return _PASSWORD_OPTION.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", text))


def summarize_error(err: BaseException | str) -> str:
    """One line for `cep status`: the user-level cause inside Spark's wrapping, redacted."""
    text = err if isinstance(err, str) else (str(err) or type(err).__name__)
    if not isinstance(err, str) and not type(err).__module__.startswith(("pyspark", "py4j")):
        return redact(text)[:2000]  # our own errors already say what they mean
    causes = [m for line in text.splitlines() if (m := _EXC_LINE.match(line))]
    ours = [m for m in causes if not m.group(1).startswith(_FRAMEWORK)]
    if ours:
        # a data store's error names the store and the query; Python's traceback of a chain shows
        # the driver's error (sqlite3.OperationalError ...) before the store's error made of it
        m = next((m for m in ours if m.group(1).startswith("stores.errors.")), ours[0])
        name = m.group(1).rsplit(".", 1)[-1]
        line = f"{name}: {m.group(2).strip()}"
    else:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(err).__name__)
        line = first
    return redact(line)[:2000]


def as_dict(progress: Any) -> dict[str, Any]:
    """A progress report as plain JSON data (PySpark's objects hold Rows in observedMetrics)."""
    text = getattr(progress, "json", None)
    if isinstance(text, str):
        return dict(json.loads(text))
    return dict(json.loads(json.dumps(progress, default=str)))


def absorb(state: dict[str, Any], progresses: list[dict[str, Any]]) -> bool:
    """Add the batches in `progresses` that `state` (one query's totals) has not counted yet."""
    changed = False
    for p in sorted(progresses, key=lambda p: int(p.get("batchId", -1))):
        if "addBatch" not in (p.get("durationMs") or {}):
            continue  # an idle trigger: no batch ran
        batch = int(p["batchId"])
        if batch <= int(state.get("batch", -1)):
            continue  # counted already (before a restart, too: the totals are persisted)
        inputs = state.setdefault("in", {})
        # records read per source, as `cep run` counts them (a source's rows are read more than
        # once in a query's plan: Spark's numInputRows would count them again)
        counts = batch_counts(p)
        for name, n in (counts.read if counts is not None else {}).items():
            inputs[name] = int(inputs.get(name, 0)) + max(0, n)
        metrics = (p.get("observedMetrics") or {}).get(OUT_METRIC) or {}
        state["out"] = int(state.get("out", 0)) + int(metrics.get("rows") or 0)
        state["batch"] = batch
        state["at"] = p.get("timestamp")
        if int(p.get("numInputRows") or 0) > 0:
            state["lag_ms"] = int(
                p.get("batchDuration") or (p.get("durationMs") or {}).get("triggerExecution", 0)
            )
        changed = True
    return changed


def totals(progress: dict[str, Any]) -> dict[str, Any]:
    """The deployment's counters from its queries' totals."""
    least: dict[str, int] = {}
    for q in progress.values():
        for desc, n in (q.get("in") or {}).items():
            least[desc] = min(least.get(desc, n), int(n))
    batches = [q for q in progress.values() if "batch" in q]
    newest = max(batches, key=lambda q: str(q.get("at") or ""), default=None)
    lags = [int(q["lag_ms"]) for q in progress.values() if q.get("lag_ms") is not None]
    at = None
    if newest is not None and newest.get("at"):
        at = datetime.fromisoformat(str(newest["at"]).replace("Z", "+00:00"))
    return {
        "events_in": sum(least.values()),
        "events_out": sum(int(q.get("out", 0)) for q in progress.values()),
        "last_batch": max((int(q["batch"]) for q in batches), default=None),
        "last_batch_at": at,
        "lag_ms": max(lags) if lags else None,
    }
