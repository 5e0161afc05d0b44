"""Which streams meet in a merge (operators.analysis.merged_sources), worked out on compiled
scripts without Spark: Spark sequences such streams together (deployer/spark/
merge_sequencer.py)."""

from __future__ import annotations

from cpl.compiler import compile_script
from deployer.spark.run.queries import sequenced_merges
from operators.analysis import merged_sources, self_merged_sources

HEAD = """
CREATE STREAMSCHEMA a WITH k integer, ts timestamp TIMESTAMP BY ts;
CREATE STREAMSCHEMA b WITH k integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE STREAMSCHEMA c WITH k integer, ts timestamp TIMESTAMP BY ts;
CREATE STREAMSCHEMA d WITH k integer, ts timestamp TIMESTAMP BY ts;
CREATE STREAMSCHEMA u WITH k integer, ts timestamp;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY note ON crm AS 'UPDATE seen SET n = n + 1 WHERE k = ?';
"""


def merges(script: str) -> list[tuple[str, ...]]:
    return merged_sources(compile_script(HEAD + script).graph)


def test_streams_meet_in_a_union_directly_or_through_per_event_operators() -> None:
    assert merges("INSERT INTO m SELECT * FROM a, b;") == [("a", "b")]
    assert merges(
        "INSERT INTO fb SELECT k, ts FROM b WHERE k > 0;"
        "INSERT INTO nc SELECT k, ts FROM c ON SQL note, r, k;"
        "INSERT INTO m SELECT * FROM fb, nc;"
    ) == [("b", "c")]
    # each stream alone: nothing to sequence together
    assert merges("INSERT INTO o SELECT k, ts FROM a WHERE k > 0; INSERT INTO p SELECT * FROM b;") == []


def test_merges_that_share_a_stream_are_one_set_in_script_order() -> None:
    got = merges(
        "INSERT INTO m1 SELECT * FROM d, b; INSERT INTO m2 SELECT * FROM b, a; INSERT INTO m3 SELECT * FROM c, c;"
    )
    assert got == [("a", "b", "d")]  # c merged with itself is still one stream


def test_a_merge_without_event_time_or_after_a_window_merges_nothing() -> None:
    # u has no event time: the Union of a and u has none either (arrival order)
    assert merges("INSERT INTO m SELECT * FROM a, u;") == []
    # the window re-times its rows: they carry no event time, and neither does the Union
    assert (
        merges(
            "INSERT INTO n SELECT k, count(*) AS ts FROM a WINDOW TUPLE SIZE 2 GROUP BY k;"
            "INSERT INTO n2 SELECT k, count(*) AS ts FROM b WINDOW TUPLE SIZE 2 GROUP BY k;"
            "INSERT INTO m SELECT * FROM n, n2;"
        )
        == []
    )


def test_a_generator_stream_passes_no_sequencer() -> None:
    graph = compile_script(HEAD + "INSERT INTO m SELECT * FROM a, b, c;").graph
    files = {"a": "file:/in/a", "b": "file:/in/b", "c": "file:/in/c"}
    assert sequenced_merges(graph, files) == [("a", "b", "c")]
    assert sequenced_merges(graph, {**files, "b": "generator:10"}) == [("a", "c")]
    assert sequenced_merges(graph, {**files, "b": "generator:10", "c": "generator:10"}) == []


def test_a_stream_that_meets_itself_in_a_merge() -> None:
    def self_merged(script: str) -> set[str]:
        return self_merged_sources(compile_script(HEAD + script).graph)

    assert self_merged(
        "INSERT INTO fa SELECT k, ts FROM a WHERE k > 0; INSERT INTO m SELECT * FROM fa, a;"
    ) == {"a"}
    assert self_merged("INSERT INTO m SELECT * FROM c, c;") == {"c"}
    # two streams, each once; a stream without event time merges in arrival order
    assert self_merged("INSERT INTO m SELECT * FROM a, b; INSERT INTO n SELECT * FROM u, u;") == set()
