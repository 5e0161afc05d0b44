"""The Spark deployment the service runs: a SparkDeployment whose outputs count the rows they write,
for the counters the catalog shows (deployer.service.reports)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deployer.service.reports import OUT_METRIC, as_dict
from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.pattern_groups import PREFIX
from deployer.spark.run.query import spark_name

KEPT_BATCHES = 200  # per sink: Spark's progress keeps a query's last 100 batches


class ServiceDeployment(SparkDeployment):
    """A SparkDeployment whose outputs count the rows they write in each batch, which its progress
    reports as observed (deployer.service.reports)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sink_rows: dict[str, dict[int, int]] = {}  # sink -> batch id -> the rows its writer wrote
        self._table_rows: dict[str, dict[int, int]] = {}  # table's query -> batch id -> the rows stored
        self._counts: dict[str, Any] = {}  # query name -> its `_written_by`, found once

    def _counted(self, what: str, output: str) -> Callable[[int, int], None]:
        """The base's count of the rows a sink's writer wrote or a table stored, and per batch
        (`_written_by`)."""
        counted = super()._counted(what, output)
        per_batch = (self._sink_rows if what == "out" else self._table_rows).setdefault(output, {})

        def count(n: int, batch_id: int) -> None:
            counted(n, batch_id)
            _note(per_batch, batch_id, n)

        return count

    def reports(self, query: Any) -> list[dict[str, Any]]:
        """The recent progress of `query` as dicts, with the rows its writers wrote in each batch as
        if observed: queries write from batch DataFrames (the stateless sinks' shared query,
        deployer.spark.run.shared; those of pattern sinks, deployer.spark.run.pattern_query), or
        split a window's rows from their failures in each batch (deployer.spark.run.failures
        `along`), so that a count Spark observes would count rows no sink or table got."""
        recent = [as_dict(p) for p in query.recentProgress]
        if query.name not in self._counts:
            self._counts[query.name] = self._written_by(query.name)
        written = self._counts[query.name]
        if written is not None:
            for p in recent:
                out = written(int(p.get("batchId", -1)))
                if out is not None:
                    p["observedMetrics"] = {**(p.get("observedMetrics") or {}), OUT_METRIC: {"rows": out}}
        return recent

    def _written_by(self, name: str) -> Any:
        """For the query named `name` that writes sinks or a table: batch id -> the rows its writers
        wrote (None: not known); None for the others (dead letters)."""
        if name in self.tally.shared_reports:  # a stateless sinks' shared query
            reports = self.tally.shared_reports[name]
            return lambda batch: r.out if (r := reports.get(batch)) is not None else None
        planned = next((q for q in self.plan if name == spark_name(self.name, q.name)), None)
        if planned is not None and planned.name.startswith("table:"):
            return self._table_rows.get(planned.name, {}).get
        if planned is None or not planned.name.startswith((PREFIX, "sink:")):
            return None
        sinks = [self._sink_rows.get(s, {}) for s in planned.writes if s in self.sinks]
        return lambda batch: sum(rows.get(batch, 0) for rows in sinks)


def _note(per_batch: dict[int, int], batch_id: int, n: int) -> None:
    """Add `n` rows to a batch's count, keeping the last KEPT_BATCHES batches."""
    per_batch[batch_id] = per_batch.get(batch_id, 0) + n
    for old in sorted(per_batch)[:-KEPT_BATCHES]:
        del per_batch[old]
