"""A stream alone with a WATERMARK delay whose order shows nowhere (only TIME windows read it, through
statements that take each event by itself) passes no Sequencer: its file source marks its late
events with the delay, and its events reach the windows as they arrive (deployer.spark.run.held).
Out-of-order events within the delay, late events beyond it, a restart half-way: the same rows and
dead letters as the reference executor, which holds the events back and releases them in
event-time order. A checkpoint of the earlier layout, whose queries kept the stream's Sequencer in
their state, resumes with it (deployer.spark.run.layout.unheld_streams); a stream whose order shows
(bound to a sink on the way) keeps its Sequencer.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    T0,
    assert_same,
    assert_same_dead_letters,
    compile_text,
    iso,
    prepare,
    run_reference,
    run_resumed,
    run_spark,
    sequencer_modes,
)

from deployer.spark.run import held

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA calls WITH caller integer, n integer, ts timestamp TIMESTAMP BY ts WATERMARK 4 SECONDS;
INSERT INTO priced SELECT caller, n * 2 AS n2, ts FROM calls WHERE n % 7 <> 3;
INSERT INTO per_caller SELECT caller, count(*) AS c, sum(n2) AS s, min(n2) AS lo, max(n2) AS hi
  FROM priced WINDOW TIME SIZE 10 SECONDS GROUP BY caller;
"""
SINKS = ["per_caller"]


def _files(n: int = 6) -> list[list[Any]]:
    """`n` files of calls; from the second on, each starts with two calls behind the file before's
    last: one by 2 s (within the WATERMARK: out of order, not late), one by 7 s (late), and ends
    with one 3 s behind its own file's latest (out of order, not late)."""
    files: list[list[Any]] = []
    for f in range(n):
        rows: list[Any] = [
            {"caller": i % 3, "n": 10 * f + i, "ts": iso(T0 + timedelta(seconds=15 * f + s))}
            for i, s in enumerate([0, 1, 3, 4, 6, 9, 12])
        ]
        if f:
            last = 15 * (f - 1) + 12
            rows[:0] = [
                {"caller": 1, "n": 500 + f, "ts": iso(T0 + timedelta(seconds=last - 2))},
                {"caller": 2, "n": 700 + f, "ts": iso(T0 + timedelta(seconds=last - 7))},
            ]
            rows.append({"caller": 0, "n": 900 + f, "ts": iso(T0 + timedelta(seconds=15 * f + 9))})
        files.append(rows)
    return files


def test_only_a_stream_whose_order_shows_nowhere_is_unheld() -> None:
    graph = compile_text(SCRIPT)
    sources = {"calls": "file:/in"}
    assert held.unheld(graph, sources, ["per_caller"]) == ["calls"]
    # bound to a sink on the way, read by a TUPLE window, or by a window with an OUTPUT clause: held
    assert held.unheld(graph, sources, ["per_caller", "PRICED"]) == []
    for changed in (
        SCRIPT.replace("WINDOW TIME SIZE 10 SECONDS", "WINDOW TUPLE SIZE 3"),
        SCRIPT.replace("GROUP BY caller;", "GROUP BY caller OUTPUT LAST EVERY 20 SECONDS;"),
        SCRIPT + "INSERT INTO big SELECT caller, n FROM calls WHERE n > 100;\n",
        SCRIPT.replace("WATERMARK 4 SECONDS", ""),  # WATERMARK 0: passes none for another reason
    ):
        assert held.unheld(compile_text(changed), sources, ["per_caller"]) == [], changed
    # not read from files: a generator's events are in order, a Redis stream's pass the Sequencer
    assert held.unheld(graph, {"calls": "redis://localhost:6379/0?stream=calls"}, []) == []


@pytest.mark.parametrize("layout", ["unheld", "earlier, with a Sequencer"])
def test_a_run_resumes_in_the_layout_it_started(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    earlier = {} if layout == "unheld" else {"unheld_streams": lambda checkpoint, wanted, merges=(): set()}
    ref, spk, ck = run_resumed(
        spark, compile_text(SCRIPT), tmp_path, "calls", _files(), SINKS, earlier, monkeypatch
    )
    late = [d for d in ref.dead if d["stage"] == "late"]
    # each file's call 7 s behind is late, and only those: the ones within the delay are not
    assert sorted(d["event"][1] for d in late) == [701, 702, 703, 704, 705], late
    assert_same(ref, spk, "per_caller", min_rows=12)
    assert_same_dead_letters(ref, spk)
    if layout == "unheld":
        assert sequencer_modes(ck) == set()
        assert json.loads((ck / held.RECORD).read_text()) == ["calls"]
    else:
        assert sequencer_modes(ck) == {"NoTime"}
        assert not (ck / held.RECORD).exists()


def test_a_stream_bound_to_a_sink_on_the_way_keeps_its_sequencer(spark: Any, tmp_path: Path) -> None:
    """There the order shows: `priced` is written in event-time order, as the reference writes it."""
    graph = compile_text(SCRIPT)
    sources = prepare(tmp_path, {"calls": _files()})
    sinks = [*SINKS, "priced"]
    ref = run_reference(graph, tmp_path / "ref", sources, sinks)
    spk = run_spark(spark, graph, tmp_path, sources, sinks, checkpoint=tmp_path / "ck", max_files=1)
    assert_same(ref, spk, "priced", min_rows=30, ordered=True)
    assert_same(ref, spk, "per_caller", min_rows=12)
    assert_same_dead_letters(ref, spk)
    assert sequencer_modes(tmp_path / "ck") == {"NoTime"}
    assert json.loads((tmp_path / "ck" / held.RECORD).read_text()) == []
