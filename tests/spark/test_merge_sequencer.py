"""The merge's Sequencer (deployer/spark/streams/merge_sequencer.py) on its own, without a JVM: the stages of
two streams fed micro-batches cut differently release each stream's events only below the least of
the streams' watermarks, so that what they release later never comes before what they released
earlier, in the merged order (event time, then input)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pyarrow as pa

from deployer.spark.streams.merge_sequencer import MergeSequencer
from deployer.spark.streams.parsed_rows import PLACEHOLDER, SEQ
from deployer.spark.streams.sequencer import LATE, LATE_TS, TAGGED, packer

STREAMS = ["a", "b"]
DELAYS = [60_000_000, 0]  # a: WATERMARK 1 MINUTE, b: none
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        ("_0", pa.int32()),
        ("_1", pa.timestamp("us", tz="UTC")),
        ("__seq", pa.string()),
        ("__end", pa.bool_()),
    ]
)
# what a stage releases: the events' columns but `__end`, then why one is late and its time
RELEASED = pa.schema(
    [*(f for f in SCHEMA if f.name != "__end"), (LATE, pa.string()), (LATE_TS, pa.timestamp("us", tz="UTC"))]
)


class _State:
    def __init__(self) -> None:
        self.value: Any = None

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value


class _Handle:
    def getValueState(self, name: str, schema: Any) -> _State:
        return _State()


class Stage:
    """The stage of one stream of the merge, fed micro-batches of both streams."""

    def __init__(self, own: int) -> None:
        self.processor = MergeSequencer(STREAMS, ["_1", "_1"], DELAYS, own, RELEASED)
        self.processor.init(_Handle())  # type: ignore[arg-type]
        self.seq = [0, 0]

    def batch(
        self, a: list[int] | None = None, b: list[int] | None = None, ends: tuple[int, ...] = ()
    ) -> list[Any]:
        """One micro-batch: the events of `a` and `b` at these seconds (each one's value is its time),
        and the end-of-input rows of the streams in `ends`; what the stage releases: (time, late?)."""
        rows = []
        for k, seconds in enumerate((a or [], b or [])):
            batch = self._rows(k, seconds, k in ends)
            if batch.num_rows:
                rows += [r for r in packer(k)(iter([batch]))]
        frame = pa.Table.from_batches(rows).to_pandas() if rows else pd.DataFrame(columns=TAGGED.names)
        out = []
        for released in self.processor.handleInputRows((0,), iter([frame]), None):
            for events in released["__events"]:
                table = pa.ipc.open_stream(events).read_all()
                for v, late, seq, ts in zip(
                    table["_0"].to_pylist(),
                    table[LATE].to_pylist(),
                    table[SEQ].to_pylist(),
                    table["_1"].to_pylist(),
                    strict=True,
                ):
                    # a placeholder row: its event time, in seconds after T0
                    out.append(
                        ("placeholder", (ts - T0).total_seconds())
                        if seq == PLACEHOLDER
                        else (v, late is not None)
                    )
        return out

    def _rows(self, k: int, seconds: list[int], end: bool) -> pa.RecordBatch:
        seqs = []
        for _ in seconds:
            seqs.append(f"{self.seq[k]:012d}")
            self.seq[k] += 1
        values: list[Any] = [*seconds, None] if end else list(seconds)
        times = [T0.timestamp() * 1e6 + s * 1e6 for s in seconds] + ([None] if end else [])
        return pa.RecordBatch.from_arrays(
            [
                pa.array(values, pa.int32()),
                pa.array([None if t is None else int(t) for t in times], pa.int64()).cast(
                    pa.timestamp("us", tz="UTC")
                ),
                pa.array(seqs + ([None] if end else []), pa.string()),
                pa.array([None] * len(seconds) + ([True] if end else []), pa.bool_()),
            ],
            schema=SCHEMA,
        )


def _run(
    batches: list[dict[str, Any]], placed: tuple[list[Any], list[Any]] | None = None
) -> tuple[list[list[Any]], list[list[Any]]]:
    """What each stage releases per micro-batch, its events; their placeholders' times into `placed`."""
    stages = [Stage(0), Stage(1)]
    out: tuple[list[list[Any]], list[list[Any]]] = ([], [])
    for batch in batches:
        for k, stage in enumerate(stages):
            released = stage.batch(**batch)
            out[k].append([r for r in released if r[0] != "placeholder"])
            if placed is not None:
                placed[k].append([t for tag, t in released if tag == "placeholder"])
    return out


def test_a_stream_that_runs_ahead_waits_for_the_other() -> None:
    a, b = _run(
        [
            {"a": [0, 100, 200], "b": [0, 300, 600, 900]},  # b runs ahead; a's watermark: 140
            {"a": [300, 250, 700]},  # a's watermark 640: b's 300 and 600 go
            {"a": [1000], "ends": (0,)},  # a ends: the merge goes to b's watermark, 900 (not at it)
            {"ends": (1,)},  # both ended: the rest
        ]
    )
    # when a ends, its 1000 still waits for b's watermark (900): b may yet bring 950
    assert a == [
        [(0, False), (100, False)],
        [(200, False), (250, False), (300, False)],
        [(700, False)],
        [(1000, False)],
    ]
    assert b == [[(0, False)], [(300, False), (600, False)], [], [(900, False)]]


def test_nothing_goes_before_every_stream_has_had_an_event_and_late_ones_go_at_once() -> None:
    a, b = _run(
        [
            {"a": [0, 100, 200]},  # b has had no event: it may still bring an earlier one
            {"a": [20], "b": [50]},  # 20 is late for a (behind 200 - 60 s); the limit is now 50
            {"b": [500]},
            {"ends": (0, 1)},
        ]
    )
    assert a == [[], [(0, False), (20, True)], [(100, False)], [(200, False)]]
    assert b == [[], [], [(50, False)], [(500, False)]]


def test_a_stream_that_ended_goes_on_when_events_come_after_its_end() -> None:
    a, b = _run(
        [
            {"a": [0], "b": [10], "ends": (0, 1)},
            {"a": [100]},  # b ended: it does not hold a back (a's own watermark still does)
            {"b": [200], "a": [300]},  # b goes on (a later run): it holds a back again
            {"ends": (0, 1)},
        ]
    )
    assert a == [[(0, False)], [], [(100, False)], [(300, False)]]
    assert b == [[(10, False)], [], [], [(200, False)]]


def test_a_stream_that_ended_without_events_releases_a_placeholder_at_the_merges_watermark() -> None:
    """Spark counts a stream that never saw a row as being at watermark 0, which would hold every TIME
    window after the merge back for ever: at the end, the stage of a stream that had no event
    releases one placeholder whose event time less its WATERMARK is the merge's watermark (the least
    of the others' largest event time less theirs); deployer.spark.streams.sources drops it right after."""
    placed: tuple[list[Any], list[Any]] = ([], [])
    a, b = _run(
        [
            {"b": [0, 300]},  # a has had no event: nothing goes
            {"ends": (0,)},  # a ended without events: it no longer holds b back; b is still live
            {"b": [900], "ends": (1,)},  # all ended: a's placeholder at b's 900 + a's 60 s
        ],
        placed,
    )
    assert a == [[], [], []] and placed[0] == [[], [], [960.0]]
    assert b == [[], [(0, False)], [(300, False), (900, False)]]


def test_a_stream_restates_what_it_released_with_every_batch() -> None:
    """Spark keeps a stream's watermark in memory only: a query started again counts one that
    releases nothing as 0, which would hold the merge back. So every micro-batch a stage runs, a
    stream that has had events releases a placeholder no earlier than any event it released and
    earlier than any it holds: its largest event time, or just below the merge's watermark."""
    placed: tuple[list[Any], list[Any]] = ([], [])
    _run(
        [
            {"a": [0, 100, 200], "b": [0, 300, 600, 900]},  # the merge's watermark: a's 140
            {"a": [300, 250, 700]},  # b is silent; the merge's watermark: a's 640
            {"a": [1000], "ends": (0,)},  # the merge's: b's 900, which b holds
            {"ends": (1,)},  # both ended: all released
        ],
        placed,
    )
    assert placed[1] == [[139.999999], [639.999999], [899.999999], [900.0]]
    assert placed[0] == [[139.999999], [639.999999], [899.999999], [1000.0]]


def test_no_placeholder_while_a_stream_is_live_or_when_none_had_events() -> None:
    a, b = _run([{"ends": (0,)}, {"ends": (1,)}])
    assert a == [[], []] and b == [[], []]
