"""examples/alerts.cpl (OUTPUT FIRST per caller, a TIME window over its output, a SNAPSHOT
dashboard) on both engines, over the calls of examples/fraud_calls/ in three files read one per
micro-batch: the same rows in the same order, and the rows its header promises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fraud_calls import as_utc, records
from spark_helpers import assert_same, chunks, compile_text, prepare, run_reference, run_spark

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "alerts.cpl"
SINKS = ["long_calls", "alerts_per_hour", "busiest"]


def test_alerts_example(spark: Any, tmp_path: Path) -> None:
    graph = compile_text(EXAMPLE.read_text())
    calls = records()
    sources = prepare(tmp_path, {"cdr": chunks(calls, 3)})
    ref = run_reference(graph, tmp_path, sources, SINKS)
    spk = run_spark(spark, graph, tmp_path, sources, SINKS, max_files=1)
    for sink in SINKS:
        assert_same(ref, spk, sink, ordered=True)
    assert spk.dead == [] and ref.dead == []
    # one alert per caller a day: every long call but a caller's second one
    long_calls = [(c["idcaller"], c["timestamp"]) for c in calls if int(str(c["duration"])) > 3600]
    alerted = [(r["idcaller"], as_utc(r["timestamp"])) for r in spk["long_calls"]]
    assert len(alerted) == len({c for c, _ in long_calls}) < len(long_calls)
    # all in the hour from 09:00 (the 11:05 call let nothing through; the watermark ends before 12:00)
    assert [r["alerts"] for r in spk["alerts_per_hour"]] == [len(alerted)]
    assert all(t.hour == 9 for _, t in alerted)
    # the dashboard: at each tick, the callers with calls in the last 5 minutes, none without
    assert {r["until"] for r in spk["busiest"]} >= {"2026-01-01T09:02:00Z", "2026-01-01T09:04:00Z"}
