"""`cep run` as a user runs it, with the moments bench/small_run breaks the run into recorded.

    SMALL_RUN_TIMINGS=FILE python bench/small_run_probe.py run SCRIPT --source ... --until-idle

The project's CLI is run as the `cep` script runs it (its entry point, `deployer.cli.main`, with the
same arguments), in this process; only the functions a run passes through are wrapped, here and only here,
to note the time: the session's start (`deployer.spark.engine.spark_session`), the deployment's
construction (source registration, the graph's translation) and `start` (its queries' plans and
first starts), each query's start, and `stop`, which is called once every query is done: the
queries' micro-batches (`recentProgress`, with their `durationMs`) are read there, before they are
stopped. The times (epoch seconds, so that the bench process can compare them with the moment it
spawned this one) go to FILE as JSON, whatever the run's outcome, in the shape bench/hand_small_run
writes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deployer.spark.engine as engine
from deployer.spark.run import deployment
from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.pattern_groups import APART

TIMINGS: dict[str, Any] = {"started": [], "queries": []}


def _timed(key: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original`, its call and return times appended to TIMINGS[key] (a list of [begin, end])."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        begin = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            TIMINGS.setdefault(key, []).append([begin, time.time()])

    return wrapper


def _started(original: Callable[..., Any]) -> Callable[..., Any]:
    """`SparkDeployment._started`, each query's name and start recorded."""

    def wrapper(self: SparkDeployment, w: Any, name: str, df: Any) -> Any:
        begin = time.time()
        q = original(self, w, name, df)
        TIMINGS["started"].append({"name": name, "at": [begin, time.time()]})
        return q

    return wrapper


def _stop(original: Callable[[SparkDeployment], None]) -> Callable[..., None]:
    """`SparkDeployment.stop`: every query is done when `run` calls it; their micro-batches are read
    before the original stops them."""

    def wrapper(self: SparkDeployment) -> None:
        TIMINGS["done"] = time.time()
        for q in self.queries:
            batches = [
                {
                    "batchId": p["batchId"],
                    "numInputRows": p["numInputRows"],
                    "durationMs": dict(p["durationMs"]),
                }
                for p in q.recentProgress
            ]
            TIMINGS["queries"].append({"name": q.name, "batches": batches})
        try:
            original(self)
        finally:
            TIMINGS["stopped"] = time.time()

    return wrapper


# Set by bench/small_run for the baseline of its pattern rules: the run plans a query per pattern
# sink, as every run did before the sinks of patterns over the same streams shared one (the layout
# a checkpoint of that time keeps: deployer.spark.run.layout.patterns_apart)
PATTERNS_APART = "SMALL_RUN_PATTERNS_APART"


def install() -> None:
    """Wrap what the run passes through (engine.run looks `spark_session` up in its module)."""
    if os.environ.get(PATTERNS_APART) == "1":
        earlier = deployment.earlier_layout
        deployment.earlier_layout = lambda checkpoint: earlier(checkpoint) | {APART}
    engine.spark_session = _timed("session", engine.spark_session)
    SparkDeployment.__init__ = _timed("init", SparkDeployment.__init__)  # type: ignore[method-assign]
    SparkDeployment.start = _timed("start", SparkDeployment.start)  # type: ignore[method-assign]
    SparkDeployment._started = _started(SparkDeployment._started)  # type: ignore[method-assign]
    SparkDeployment.stop = _stop(SparkDeployment.stop)  # type: ignore[method-assign]


def main() -> None:
    install()
    from deployer.cli import main as cep  # the `cep` script's entry point

    try:
        cep()
    finally:
        TIMINGS["exit"] = time.time()
        Path(os.environ["SMALL_RUN_TIMINGS"]).write_text(json.dumps(TIMINGS))


if __name__ == "__main__":
    main()
