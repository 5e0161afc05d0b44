"""A Spark run's progress (deployer.spark.run.reporter): a bar on a terminal, plain lines elsewhere.

Without a JVM: the queries are stand-ins that report progress as Spark's StreamingQuery does.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pytest

from deployer.spark.run import reporter
from deployer.spark.run.reporter import Reporter, progress_text


@dataclass
class Query:
    name: str
    lastProgress: dict[str, Any] | None  # as StreamingQuery names it


class Counter:
    def __init__(self, value: int) -> None:
        self.value = value


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


QUERIES = [
    Query("cep:sink:priced", {"batchId": 3, "inputRowsPerSecond": 10.0, "processedRowsPerSecond": 20.0}),
    Query("cep:table:bill", None),
]


def test_the_text_names_each_query_s_batch_and_the_caches() -> None:
    caches = {"plan_of": (Counter(5), Counter(2), Counter(1))}
    assert progress_text(QUERIES, caches) == (
        "sink:priced: batch 3, in 10/s, processed 20/s; cache plan_of: 5 hits, 2 misses, 1 loads"
    )
    assert progress_text([Query("cep:table:bill", None)], {}) == "starting"


def test_plain_lines_when_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    shown = Reporter(out, total=2, every=0.0)
    assert not shown.live
    shown.update(1, lambda: progress_text(QUERIES, {}))
    shown.say("stopping: letting the micro-batches in progress finish")
    shown.close()
    assert out.getvalue().splitlines() == [
        "progress: sink:priced: batch 3, in 10/s, processed 20/s",
        "stopping: letting the micro-batches in progress finish",
    ]


def test_a_bar_on_a_terminal_and_no_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporter, "_REDRAW_S", 0.0)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = Terminal()
    shown = Reporter(out, total=2, every=0.0)
    assert shown.live
    shown.update(1, lambda: progress_text(QUERIES, {}))
    shown.say("stopping: letting the micro-batches in progress finish")
    shown.close()
    text = out.getvalue()
    assert "progress:" not in text  # the bar instead of lines
    assert "queries" in text and "1/2" in text and "sink:priced: batch 3" in text, text
    assert "stopping: letting the micro-batches in progress finish" in text
