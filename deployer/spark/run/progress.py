"""What the queries of a deployment did: per micro-batch counts read off Spark's progress reports,
summed into the run's counts (docs/guarantees.md, "Counting events"), and a failed query's error.

Each query reads its sources and runs its operators itself, so a run's counts are combined across
queries: `rows_in` is the least any query read of each source, `filtered` and `late` the most any
query counted. A query keeps only its last 100 progress reports
(spark.sql.streaming.numRecentProgressUpdates), so the counts are taken as the run goes.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from deployer.engine import one_line
from deployer.spark.metrics import BatchCounts, batch_counts
from deployer.spark.run.query import spark_name
from deployer.spark.run.shared import Report


@dataclass
class SparkRunStats:
    """What a run did. Every query reads its sources itself, so `rows_in` counts each source's
    records once (the least any query read of it), not once per query; blank lines are no records."""

    batches: int = 0
    rows_in: int = 0
    queries: list[str] = field(default_factory=list)
    dead_lettered: int = 0
    rows_out: int = 0  # rows written to the sinks
    stopped: bool = False  # stopped on request (`run`'s `stop`), not at the end of its input
    applied: int = 0  # rows the stores accepted into tables
    # events a Filter or MultiFilter dropped (the most any query counted); None: not counted
    filtered: int | None = 0
    late: int = 0  # rows the stateful operators dropped behind the watermark (the most any query did)


# Failures that say nothing of a query's data or script: a Python worker that did not connect back
# to the JVM in time (Spark waits 10 s for one, which a loaded machine can exceed when a worker
# starts). The query is started again from its checkpoint, which replays its unfinished batch, up to
# RESTARTS times in a run (deployer.spark.run.deployment); any other failure ends the run.
TRANSIENT = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
)
RESTARTS = 3


def is_transient(text: str) -> bool:
    return any(t in text for t in TRANSIENT)


class QueryFailed(RuntimeError):
    """A streaming query stopped with an error: the message is its root cause, `detail` all of it."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


# The line that says what went wrong, in the Python traceback Spark wraps an error of a batch in. A
# data store's message may go on over more lines (a table that is not as declared shows both
# definitions): they are kept, up to the blank line, SQLSTATE, JVM frame or next traceback that ends
# it, and joined into one line, as the reference executor's stop joins them (deployer.engine.one_line).
_STORE_ERROR = re.compile(
    r"^stores\.errors\.\w+: (.+(?:\n(?![ \t]*$| SQLSTATE: |stores\.errors\.|\tat |\s*File \"|Traceback |During handling|The above |=== ).*)*)",
    re.MULTILINE,
)
_PYTHON_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def root_cause(text: str) -> str:
    """A data store's error if there is one (its message names the store, URL redacted), else the
    last Python exception of the traceback, else the first line of `text`."""
    for pattern in (_STORE_ERROR, _PYTHON_ERROR):
        found = pattern.findall(text)
        if found:
            last = found[-1]
            return one_line(last) if isinstance(last, str) else f"{last[0]}: {last[1]}"
    return text.strip().splitlines()[0] if text.strip() else "unknown error"


class Tally:
    """The counts of every micro-batch of every query, taken from their progress as the run goes."""

    def __init__(self, deployment: str) -> None:
        # query name -> batch id -> its counts
        self.counts: dict[str, dict[int, BatchCounts]] = {}
        self.deployment = deployment
        # query name -> batch id -> what a stateless sinks' shared query's writer counted in it
        # (deployer.spark.run.shared): its Filters work on batch DataFrames, which report no progress
        self.shared_reports: dict[str, dict[int, Report]] = {}

    def reporter(self, query: str) -> Callable[[int, Report], None]:
        """Where the writer of the shared query `query` (its name in the plan) tells its reports."""
        reports = self.shared_reports.setdefault(spark_name(self.deployment, query), {})

        def report(batch_id: int, found: Report) -> None:
            reports[batch_id] = found
            for old in sorted(reports)[:-200]:  # progress keeps the last 100 batches
                del reports[old]

        return report

    def absorb(self, queries: list[Any]) -> None:
        """Take the counts of the batches each query has reported since the last call."""
        for q in queries:
            seen = self.counts.setdefault(q.name, {})
            reports = self.shared_reports.get(q.name, {})
            for p in q.recentProgress:
                batch = int(p["batchId"])
                if batch not in seen and (counts := batch_counts(p)) is not None:
                    if batch in reports:
                        counts = replace(counts, filtered=reports[batch].filtered)
                    seen[batch] = counts

    def totals(self, stats: SparkRunStats, count_filtered: bool) -> SparkRunStats:
        """`stats` with the batches, records read, events filtered and late rows of every query."""
        read: dict[str, int] = {}
        filtered: dict[str, int] = {}
        late: dict[str, int] = {}
        for batches in self.counts.values():
            stats.batches += len(batches)
            per_source: dict[str, int] = {}
            per_node: dict[str, int] = {}
            per_stream: dict[str, int] = {}
            for b in batches.values():
                for key, n in b.read.items():
                    per_source[key] = per_source.get(key, 0) + n
                for key, n in b.filtered.items():
                    per_node[key] = per_node.get(key, 0) + n
                for key, n in b.late.items():
                    per_stream[key] = per_stream.get(key, 0) + n
            for key, n in per_source.items():
                # The least any query read: a query whose plan reads a source twice (two
                # branches of a union) counts its input rows twice.
                read[key] = min(read.get(key, n), n)
            for key, n in per_node.items():
                # Every query that runs a node counts the same events; one that stopped early, fewer.
                filtered[key] = max(filtered.get(key, n), n)
            for key, n in per_stream.items():
                # Every query that passes a stream's Sequencer sets aside the same late events, and
                # each query runs the stateful operators upstream of its output: per stream (and for
                # the operators' drops) the most any query counted. Per stream, not per query: the
                # late events of a stream only the dead-letters query reads are counted there alone
                # (found by the fuzzer: tests/fuzz/test_found_late_events_of_an_unread_stream.py).
                late[key] = max(late.get(key, n), n)
        stats.late = max(stats.late, sum(late.values()))
        stats.rows_in = sum(read.values())
        stats.filtered = sum(filtered.values()) if count_filtered else None
        return stats


def wait_for_end(running: Any, seconds: float) -> None:
    """Wait `seconds`, or less if the query `running` (a StreamingQuery, or None: sleep) ends first:
    Spark's own wait for its end, where a sleep let a run end up to `seconds` after its last query
    did."""
    if running is None:
        time.sleep(seconds)
        return
    with contextlib.suppress(Exception):  # it failed: the deployment raises that at its next look
        running.awaitTermination(seconds)
