"""A stream alone with WATERMARK 0 read from files passes no Sequencer: its file source marks its late
events (deployer.spark.streams.file_source, deployer.spark.streams.lateness) and carries the stream's
largest event time in its offsets. A checkpoint of the earlier layout, whose queries kept such a
stream's Sequencer in their state, resumes with it (deployer.spark.run.layout.late_marked_by_sources):
Spark finds an operator's state by its place in the plan.

Both ways, a run that resumes half-way through the input writes what the reference executor writes
over the whole input: the first event after the restart is late only against the events before it.
A micro-batch of many files is read in several partitions, each from the largest event time before
its first file, which the driver noted when it planned the batch, or reads again when it replays it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
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

from deployer.spark.streams import file_source as files
from deployer.spark.streams.lateness import NONE, micros

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA calls WITH caller integer, n integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO per_caller SELECT caller, count(*) AS c, sum(n) AS s
  FROM calls WINDOW TIME SIZE 10 SECONDS GROUP BY caller;
"""
SINKS = ["per_caller"]
MARK = "late-events-marked-by-sources"


def _files(n: int = 4) -> list[list[Any]]:
    """`n` files of calls, in order within each but one; from the second on, the first call is
    behind the file before's last (late against the earlier files alone), and the last is behind
    its own file's."""
    files: list[list[Any]] = []
    for f in range(n):
        rows: list[Any] = [
            {"caller": i % 3, "n": 10 * f + i, "ts": iso(T0 + timedelta(seconds=15 * f + s))}
            for i, s in enumerate([0, 1, 3, 4, 6, 9, 12])
        ]
        if f:
            rows.insert(0, {"caller": 1, "n": 500 + f, "ts": iso(T0 + timedelta(seconds=15 * f - 5))})
            rows.append({"caller": 2, "n": 900 + f, "ts": iso(T0 + timedelta(seconds=15 * f + 2))})
        files.append(rows)
    return files


def _source_offsets(ck: Path) -> list[dict[str, Any]]:
    """The file source's offsets the checkpoint's queries logged, batch after batch."""
    out = []
    for path in sorted(ck.glob("*/offsets/[0-9]*"), key=lambda p: int(p.name)):
        out += [json.loads(line) for line in path.read_text().splitlines()[2:] if '"files"' in line]
    return out


@pytest.mark.parametrize("layout", ["marked by sources", "earlier, with a Sequencer"])
def test_a_run_resumes_in_the_layout_it_started(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    earlier = {} if layout == "marked by sources" else {"late_marked_by_sources": lambda checkpoint: False}
    ref, spk, ck = run_resumed(
        spark, compile_text(SCRIPT), tmp_path, "calls", _files(), SINKS, earlier, monkeypatch
    )
    late = [d for d in ref.dead if d["stage"] == "late"]
    assert len(late) == 6 and {d["event"][1] for d in late} >= {502, 503}, late
    assert_same(ref, spk, "per_caller", min_rows=6)
    assert_same_dead_letters(ref, spk)
    if layout == "marked by sources":
        assert sequencer_modes(ck) == set()
        assert (ck / MARK).exists()
        # the stream's largest event time so far, batch after batch: what the restart went on from
        latest = [o["latest"] for o in _source_offsets(ck)]
        assert len(latest) >= 4 and latest == sorted(latest) and latest[0] is not None, latest
    else:
        assert sequencer_modes(ck) == {"NoTime"}
        assert not (ck / MARK).exists()


MANY = 2 * files.FILES_PER_PARTITION + 5  # one micro-batch, three partitions


def test_a_micro_batch_of_many_files_is_read_in_partitions(spark: Any, tmp_path: Path) -> None:
    """Each partition's first file starts with a call late only against the partition before's."""
    graph = compile_text(SCRIPT)
    sources = prepare(tmp_path, {"calls": _files(MANY)})
    ref = run_reference(graph, tmp_path / "ref", sources, SINKS)
    spk = run_spark(spark, graph, tmp_path / "spark", sources, SINKS)
    assert len([d for d in ref.dead if d["stage"] == "late"]) == 2 * (MANY - 1)
    assert_same(ref, spk, "per_caller", min_rows=3 * MANY)
    assert_same_dead_letters(ref, spk)


def test_each_partition_starts_from_the_largest_event_time_before_it(tmp_path: Path) -> None:
    """As the driver plans the batch, and as a reader that did not plan it (a replay) finds it."""
    graph = compile_text(SCRIPT)
    directory = Path(prepare(tmp_path, {"calls": _files(MANY)})["calls"][len("file:") :])
    (source,) = graph.sources()
    ts = source.schema.position("ts")
    opts = files.options(directory, str(directory), tmp_path / "log", source.schema, None, (ts, "calls", 0))
    planner = files.FileStreamReader(opts)
    start = planner.initialOffset()
    end = planner.latestOffset(start, ReadAllAvailable())
    parts = planner.partitions(start, end)
    replayed = files.FileStreamReader(opts).partitions(start, end)
    assert [len(p.names) for p in parts] == [16, 16, MANY - 32]
    expected, latest = [], NONE
    for k, name in enumerate(sorted(p.name for p in directory.iterdir())):
        if k % files.FILES_PER_PARTITION == 0:
            expected.append(latest)
        batch = files.records_batch(
            files.read_file(directory / name, name), k, source.schema, files.arrow_schema(source.schema)
        )
        latest = max(latest, int(micros(batch, "_2").max()))
    assert [p.latest for p in parts] == [p.latest for p in replayed] == expected
    assert expected[0] == NONE and expected[1] < expected[2]
    assert end["latest"] == latest
