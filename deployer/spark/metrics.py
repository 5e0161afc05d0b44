"""The counts a micro-batch reports, read off a query's progress report (a plain dict), with no
Spark needed: by the deployment's tally (deployer.spark.run.progress) and by the service's counters
(deployer.service.reports), so that both count alike (docs/guarantees.md, "Counting events").

The queries publish them as observed metrics named here: records read per source (`cep_in:<stream>`,
deployer.spark.streams.sources), events dropped per Filter node (`cep_filtered:<node>`,
deployer.spark.translate.graph), late events per stream (`cep_late:<stream>`). The events a merged
stream releases (`cep_released:<stream>`, deployer.spark.streams.sources) are observed for the plan's
sake only, and read by nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INPUT_METRIC = "cep_in:"
LATE_METRIC = "cep_late:"
FILTERED_METRIC = "cep_filtered:"
RELEASED_METRIC = "cep_released:"


@dataclass(frozen=True)
class BatchCounts:
    """What one micro-batch of one query reported in its progress."""

    read: dict[str, int]  # per source: records (file sources, observed) or input rows (others)
    filtered: dict[str, int]  # per Filter/MultiFilter node (observed, graph.count_filtered)
    # late events per stream (`cep_late:<stream>`, set aside by its Sequencer), and under DROPPED the
    # rows the query's stateful operators dropped behind the watermark
    late: dict[str, int]


DROPPED = "dropped"


def batch_counts(p: Any) -> BatchCounts | None:
    """The counts of one progress report; None for a trigger that ran no batch."""
    if "addBatch" not in (p.get("durationMs") or {}):
        return None
    read: dict[str, int] = {}
    filtered: dict[str, int] = {}
    late = {
        DROPPED: sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in p.get("stateOperators") or [])
    }
    for name, row in (p.get("observedMetrics") or {}).items():
        if name.startswith(INPUT_METRIC):
            read[name] = int(row["rows"] or 0)
        elif name.startswith(FILTERED_METRIC):
            filtered[name[len(FILTERED_METRIC) :]] = int(row["rows"] or 0)
        elif name.startswith(LATE_METRIC):
            late[name] = late.get(name, 0) + int(row["rows"] or 0)
    for src in p.get("sources") or []:
        # File and Redis sources count their records by observation (deployer.spark.streams.sources.split);
        # the synthetic generator's rows are its input rows.
        key = str(src.get("description"))
        if key.startswith("RateStream"):
            read[key] = read.get(key, 0) + int(src.get("numInputRows") or 0)
    return BatchCounts(read, filtered, late)
