"""A stream's Sequencer runs without Spark's event-time timers (it sets none: it releases on its own
largest event time), which makes each micro-batch of a timed stream cheaper; a checkpoint of the
earlier layout, whose Sequencers kept them, resumes with them, since Spark refuses to resume an
operator in another time mode (deployer.spark.run.layout.sequencer_timers).

Both ways, a run that resumes half-way through the input writes what the reference executor writes
over the whole input: the events held across the restart (WATERMARK), the late ones dead-lettered,
the windows in event-time order.
"""

from __future__ import annotations

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
    run_resumed,
    sequencer_modes,
)

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA calls WITH caller integer, n integer, ts timestamp TIMESTAMP BY ts WATERMARK 5 SECONDS;
INSERT INTO per_caller SELECT caller, count(*) AS c, sum(n) AS s
  FROM calls WINDOW TIME SIZE 10 SECONDS GROUP BY caller;
INSERT INTO big SELECT caller, n, ts FROM calls WHERE n >= 20;
"""
# `big` writes the stream's events in their order: its queries hold them back in a Sequencer (with
# the window alone reading it, the stream would pass none: deployer.spark.run.held)
SINKS = ["per_caller", "big"]
MARK = "sequencers-without-timers"


def _files() -> list[list[Any]]:
    """Four files of calls, a few seconds out of order within each (held by the WATERMARK), and from
    the second on one call behind the stream by more than it (late)."""
    files: list[list[Any]] = []
    for f in range(4):
        offsets = [0, 3, 1, 6, 4, 9, 7, 12]
        rows: list[Any] = [
            {"caller": i % 3, "n": 10 * f + i, "ts": iso(T0 + timedelta(seconds=15 * f + s))}
            for i, s in enumerate(offsets)
        ]
        if f:
            rows.append({"caller": 2, "n": 999, "ts": iso(T0 + timedelta(seconds=15 * f - 20))})
        files.append(rows)
    return files


@pytest.mark.parametrize("layout", ["without timers", "earlier, with timers"])
def test_a_run_resumes_its_sequencers_in_the_mode_they_started(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    earlier = {} if layout == "without timers" else {"sequencer_timers": lambda checkpoint: True}
    ref, spk, ck = run_resumed(
        spark, compile_text(SCRIPT), tmp_path, "calls", _files(), SINKS, earlier, monkeypatch
    )
    assert len([d for d in ref.dead if d["stage"] == "late"]) == 3
    assert_same(ref, spk, "per_caller", min_rows=6)
    assert_same(ref, spk, "big", min_rows=12, ordered=True)
    assert_same_dead_letters(ref, spk)
    if layout == "without timers":
        assert sequencer_modes(ck) == {"NoTime"}
        assert (ck / MARK).exists()
    else:
        assert sequencer_modes(ck) == {"EventTime"}
        assert not (ck / MARK).exists()
