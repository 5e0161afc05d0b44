"""Spark's watermark is declared only by a deployment whose script has an operator that reads it (a
window, join, pattern or OUTPUT limit: deployer.spark.run.watermarks.declares_watermarks). A script of
stateless operators declares none on its streams with event time, whichever way they are sequenced
(a merge's Sequencer, a stream's own, or its file source for WATERMARK 0), and writes what the
reference executor writes, late events included: lateness is decided by the Sequencers and the
file sources, not by Spark's watermark. A checkpoint written when such a script still declared it
resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    assert_same,
    assert_same_dead_letters,
    at,
    collect,
    compile_text,
    prepare,
    run_deployment,
    run_reference,
    run_resumed,
)

from deployer.spark.run.watermarks import declares_watermarks

pytestmark = pytest.mark.spark

STATELESS = """
CREATE STREAMSCHEMA a WITH k integer, n integer, ts timestamp TIMESTAMP BY ts WATERMARK 5 SECONDS;
CREATE STREAMSCHEMA b WITH k integer, n integer, ts timestamp TIMESTAMP BY ts WATERMARK 5 SECONDS;
CREATE STREAMSCHEMA c WITH k integer, n integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO both SELECT * FROM a, b;
INSERT INTO big SELECT k, n * 2 AS m, ts FROM both WHERE n > 1;
INSERT INTO cs SELECT k, n, ts FROM c WHERE n > 0;
"""
WINDOW = STATELESS + "INSERT INTO w SELECT k, count(*) AS c FROM c WINDOW TIME SIZE 10 SECONDS GROUP BY k;\n"


def _files(stream: int, start: int = 0) -> list[list[dict[str, Any]]]:
    """Three files of events a second apart; each file after the first starts with an event late
    against the one before (behind it by more than any WATERMARK here)."""
    out = []
    for f in range(3):
        rows = [{"k": i % 2, "n": 10 * f + i + stream, "ts": at(start + 30 * f + i)} for i in range(5)]
        if f:
            rows.insert(0, {"k": 1, "n": 900 + f, "ts": at(start + 30 * f - 40)})
        out.append(rows)
    return out


def _watermarked_queries(deployment: Any) -> dict[str, bool]:
    """Per query, whether Spark reported a watermark for it (its progress has one only then)."""
    return {
        q.name: any("watermark" in p.get("eventTime", {}) for p in q.recentProgress)
        for q in deployment.queries
    }


@pytest.mark.parametrize("script", ["stateless", "with a window"])
def test_only_a_script_with_a_window_declares_watermarks(spark: Any, tmp_path: Path, script: str) -> None:
    graph = compile_text(STATELESS if script == "stateless" else WINDOW)
    sinks = ["big", "cs"] + ([] if script == "stateless" else ["w"])
    sources = prepare(tmp_path, {"a": _files(0), "b": _files(1), "c": _files(2)})
    ref = run_reference(graph, tmp_path / "ref", sources, sinks)
    deployment = run_deployment(spark, graph, tmp_path, sources, sinks, max_files=1)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", sinks)
    for sink in sinks:
        assert_same(ref, spk, sink, min_rows=2)
    assert_same_dead_letters(ref, spk)
    assert len([d for d in ref.dead if d["stage"] == "late"]) >= 4
    assert declares_watermarks(graph) is (script != "stateless")
    watermarked = _watermarked_queries(deployment)
    if script == "stateless":
        assert watermarked and not any(watermarked.values()), watermarked
    else:
        assert watermarked["cep:sink:w"], watermarked


def test_a_checkpoint_written_with_watermarks_resumes_without(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first half of the input run as a stateless script ran before (a watermark on each stream),
    the rest resumed without one: the same rows and dead letters as the reference over all of it."""
    graph = compile_text(
        "CREATE STREAMSCHEMA a WITH k integer, n integer, ts timestamp TIMESTAMP BY ts WATERMARK 5 SECONDS;\n"
        "INSERT INTO big SELECT k, n * 2 AS m, ts FROM a WHERE n > 1;\n"
    )
    earlier = {"declares_watermarks": lambda graph: True}
    ref, spk, _ = run_resumed(
        spark, graph, tmp_path, "a", _files(0) + _files(3, start=90), ["big"], earlier, monkeypatch
    )
    assert_same(ref, spk, "big", min_rows=10)
    assert_same_dead_letters(ref, spk)
    assert len([d for d in ref.dead if d["stage"] == "late"]) >= 3
