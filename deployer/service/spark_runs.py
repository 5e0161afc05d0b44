"""The Spark deployment the service runs: a SparkDeployment whose outputs count the rows they write,
for the counters the catalog shows (deployer.service.reports)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from deployer.service.reports import OUT_METRIC, as_dict
from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.queries import SHARED_QUERY


class ServiceDeployment(SparkDeployment):
    """A SparkDeployment whose outputs count their rows (observed metrics in each progress)."""

    def _start(self, df: Any, name: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(name, str) and name.startswith(("sink:", "table:")):
            df = df.observe(OUT_METRIC, F.count(F.lit(1)).alias("rows"))
        super()._start(df, name, *args, **kwargs)

    def reports(self, query: Any) -> list[dict[str, Any]]:
        """The recent progress of `query` as dicts. The shared query of the stateless sinks
        (deployer.spark.run.shared) writes from batch DataFrames, which report nothing: its writer
        counted the rows it wrote, added here as if observed."""
        recent = [as_dict(p) for p in query.recentProgress]
        if query.name.endswith(f":{SHARED_QUERY}"):
            for p in recent:
                report = self.tally.shared_reports.get(int(p.get("batchId", -1)))
                if report is not None:
                    p["observedMetrics"] = {
                        **(p.get("observedMetrics") or {}),
                        OUT_METRIC: {"rows": report.out},
                    }
        return recent
