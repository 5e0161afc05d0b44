"""Found by the differential fuzzer (tests/fuzz): seed 1744, minimized by hand.

A Union of two TIME windows' rows, one window over s1, the other over s2, which ends the input
without an event (no file, an empty file, or only records it rejects). The reference's merge leaves
an input that ended without any event out of its watermark and wrote s1's windows; Spark keeps one
watermark per query, the least of its streams', counting a stream that never had a row as 0, and
closed none (3 rows against 0). Such a stream, whether its file source marks its late events or a
Sequencer of its own holds it, now ends the run with a placeholder row beyond any event when every
query that reads it and waits for Spark's watermark reads another stream too
(deployer/spark/run/coupled.py); a stream that such a query also reads alone, or one of a merge its
Sequencers hold, is a known difference (docs/language.md, "Engines").
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

from cpl.compiler import compile_script
from deployer.spark.run.coupled import Partners, partners

S1 = [json.dumps({"k": i, "ts": f"2026-01-01T0{i}:00:00Z"}) for i in range(4)]
S2 = {"no file": [], "an empty file": [[]], "rejected records only": [["{not json", '{"k": 1}']]}


_TUPLE_S2 = "INSERT INTO t10 SELECT count(*) AS n FROM s2 WINDOW TUPLE SIZE 2;\n"


def _script(delay1: str = "", delay2: str = "", tuple_over: str = "") -> str:
    return (
        f"CREATE STREAMSCHEMA s1 WITH k integer, ts timestamp TIMESTAMP BY ts{delay1};\n"
        f"CREATE STREAMSCHEMA s2 WITH k integer, ts timestamp TIMESTAMP BY ts{delay2};\n"
        "INSERT INTO a6 SELECT count(*) AS n, window_start() AS ws FROM s1 WINDOW TIME SIZE 1 SECOND;\n"
        "INSERT INTO a7 SELECT count(*) AS n, window_start() AS ws FROM s2 WINDOW TIME SIZE 1 SECOND;\n"
        "INSERT INTO u8 SELECT * FROM a6, a7;\n"
        + (
            f"INSERT INTO t9 SELECT count(*) AS n FROM {tuple_over} WINDOW TUPLE SIZE 2;\n"
            if tuple_over
            else ""
        )
    )


@pytest.mark.spark
@pytest.mark.parametrize("partitions", [1, 2])
@pytest.mark.parametrize("s2", list(S2))
def test_windows_beside_a_stream_without_events(spark: Any, tmp_path: Any, s2: str, partitions: int) -> None:
    case = Case(script=_script(), inputs={"s1": [S1], "s2": S2[s2]}, sinks=["u8"], partitions=partitions)
    ref = check_case(case, spark, None, tmp_path)
    assert len(ref.streams["u8"]) == 3  # s1's windows at 00:00, 01:00 and 02:00 closed


@pytest.mark.spark
@pytest.mark.parametrize(
    ("script", "sinks"),
    [
        # both delayed, only TIME windows read them: neither passes a Sequencer (deployer.spark.run.held)
        (_script(" WATERMARK 1 SECOND", " WATERMARK 1 SECOND"), ["u8"]),
        # s1 held by its Sequencer (its order shows in a TUPLE window): its watermark is 0 without events
        (_script(" WATERMARK 1 SECOND", "", "s1"), ["u8", "t9"]),
        # s1's window a sink of its own too: a query that reads s1 alone, which had events
        (_script(), ["u8", "a6"]),
        # s2 held by its Sequencer: its end-of-input row, which Spark's watermark counts, placed
        (_script("", " WATERMARK 1 SECOND", "s2"), ["u8", "t9"]),
        # both held, each by its own Sequencer
        (_script(" WATERMARK 1 SECOND", " WATERMARK 1 SECOND", "s1") + _TUPLE_S2, ["u8", "t9", "t10"]),
    ],
    ids=["both-unheld", "beside-a-held-stream", "the-other-read-alone-too", "held", "both-held"],
)
def test_windows_beside_a_stream_without_events_otherwise_read(
    spark: Any, tmp_path: Any, script: str, sinks: list[str]
) -> None:
    case = Case(script=script, inputs={"s1": [S1], "s2": []}, sinks=sinks, partitions=1)
    ref = check_case(case, spark, None, tmp_path)
    assert len(ref.streams["u8"]) == 3


def test_which_streams_place_a_row_at_their_end() -> None:
    """Only where every query that reads the stream and waits for Spark's watermark reads another
    stream with event time: a query that read it alone would keep the row's watermark for good."""
    found = compile_script(_script()).graph
    assert partners(found, {"s1", "s2"}, ["u8"]) == {
        "s1": Partners(("s2",), False),
        "s2": Partners(("s1",), False),
    }
    assert partners(found, {"s2"}, ["u8"]) == {"s2": Partners((), True)}  # s1 places no row
    assert partners(found, {"s2"}, ["u8"], {"s1"}) == {  # s1 held by a Sequencer of its own
        "s1": Partners(("s2",), False),
        "s2": Partners(("s1",), False),
    }
    assert partners(found, {"s1", "s2"}, ["u8", "a7"]) == {"s1": Partners(("s2",), False)}
    # s1 held and read alone by a6's query: it places no row, and notes nothing (its source does
    # not read its events): with none, its watermark stays at 0 and holds the query where it was
    assert partners(found, {"s2"}, ["u8", "a6"], {"s1"}) == {"s2": Partners((), True)}
    assert partners(found, {"s1", "s2"}, ["a6", "a7"]) == {}  # no query reads both
    text = (
        _script()
        .replace("WINDOW TIME SIZE 1 SECOND", "WINDOW TUPLE SIZE 2")
        .replace(", window_start() AS ws", "")
    )
    tuples = compile_script(text).graph
    assert partners(tuples, {"s1", "s2"}, ["u8"]) == {}  # nothing waits for Spark's watermark
