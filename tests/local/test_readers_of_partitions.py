"""A statement whose result depends on the order of its rows, reading rows that come out of time
order on Spark, a pattern's with PARTITION BY or a join's (cpl.plan_order): it reads them in time
order once the watermark has passed them, through an OutputRate `IN TIME ORDER` the planner puts
before it, on both engines (the differential tests:
tests/fuzz/test_found_readers_of_partitions_that_run_apart.py, tests/fuzz/test_pairs_out_of_time_order.py).
What reads by time, and a table keyed by a pattern's partition key, read the rows as they come."""

from __future__ import annotations

import pytest
from output_helpers import Timeline

from cpl.compiler import compile_script
from cpl.errors import CompileError
from operators import graph as g
from operators.output_node import OutputRate

STREAMS = (
    "CREATE STREAMSCHEMA s WITH ip varchar, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "CREATE DATASTORE db TYPE sqlite;\n"
    "CREATE SQLQUERY bump ON db AS 'UPDATE counts SET n = n + 1 WHERE ip = ?';\n"
    "CREATE TABLE by_ip (ip varchar, v integer, PRIMARY KEY (ip)) IN db;\n"
    "CREATE TABLE by_v (v integer, ip varchar, PRIMARY KEY (v)) IN db;\n"
)
PAIRS = "FROM PATTERN EVERY e1=s -> e2=s[v > e1.v] WITHIN 10 SECONDS"
PARTITIONED = f"INSERT INTO m SELECT e1.ip AS ip, e2.v AS v, match_time() AS t {PAIRS} PARTITION BY ip;\n"


def _graph(statements: str, pattern: str = PARTITIONED) -> g.Graph:
    return compile_script(STREAMS + pattern + statements).graph


def _reorders(graph: g.Graph) -> list[OutputRate]:
    return [n for n in graph.nodes if isinstance(n, OutputRate) and n.reorders]


@pytest.mark.parametrize(
    ("reader", "in_order"),
    [
        ("INSERT INTO w SELECT count(*) AS n FROM m WINDOW TUPLE SIZE 3;", True),
        ("INSERT INTO w SELECT count(*) AS n FROM m WINDOW BATCH START (v > 1) STOP (v > 5);", True),
        ("INSERT INTO TABLE by_v SELECT v, ip FROM m;", True),  # two partitions may write one v
        ("INSERT INTO w SELECT ip FROM m ON SQL bump, b, ip, changed;", True),
        ("INSERT INTO w SELECT count(*) AS n FROM m WINDOW TIME SIZE 1 SECOND;", False),  # by time
        ("INSERT INTO TABLE by_ip SELECT ip, v FROM m;", False),  # keyed by the partition key
        ("INSERT INTO w SELECT ip, v FROM m WHERE v > 2;", False),
        ("INSERT INTO w SELECT ip, v FROM m OUTPUT FIRST EVERY 3 EVENTS;", False),  # the limit waits
    ],
)
def test_what_reads_a_patterns_partitions_in_time_order(reader: str, in_order: bool) -> None:
    graph = _graph(reader)
    nodes = _reorders(graph)
    assert len(nodes) == int(in_order)
    if in_order:
        assert nodes[0].params() == {"output": "IN TIME ORDER", "in_time_order": True}  # cep explain
        assert nodes[0].event_time is None  # its rows leave behind the watermark
        assert graph.consumers(g.Port(nodes[0].id))  # the reader reads it, not the pattern


def test_a_limit_on_a_reader_waits_for_the_watermark_itself() -> None:
    graph = _graph("INSERT INTO w SELECT ip, v FROM m WHERE v > 2 OUTPUT FIRST EVERY 3 EVENTS;")
    (rate,) = [n for n in graph.nodes if isinstance(n, OutputRate)]
    assert rate.in_time_order and not rate.reorders


def test_readers_of_one_stream_share_one_node_and_a_pattern_without_partitions_needs_none() -> None:
    two = (
        "INSERT INTO w SELECT count(*) AS n FROM m WINDOW TUPLE SIZE 3;\n"
        "INSERT INTO x SELECT max(v) AS n FROM m WINDOW TUPLE SIZE 2;\n"
    )
    assert len(_reorders(_graph(two))) == 1
    whole = f"INSERT INTO m SELECT e1.ip AS ip, e2.v AS v, match_time() AS t {PAIRS};\n"
    assert _reorders(_graph(two, whole)) == []  # one automaton: its rows come in time order


def test_a_reader_through_statements_between_is_read_in_time_order() -> None:
    graph = _graph(
        "INSERT INTO f SELECT ip, v + 1 AS v, t FROM m WHERE v > 0;\n"
        "INSERT INTO w SELECT count(*) AS n FROM f WINDOW TUPLE SIZE 3;\n"
    )
    assert len(_reorders(graph)) == 1


@pytest.mark.parametrize(
    ("reader", "where"),
    [
        ("INSERT INTO w SELECT count(*) AS n FROM m WINDOW TUPLE SIZE 3;", "a TUPLE window reads 'm'"),
        (
            "INSERT INTO TABLE by_v SELECT v, ip FROM m;",
            "INSERT INTO TABLE by_v (an upsert by its primary key)",
        ),
        ("INSERT INTO w SELECT ip FROM m OUTPUT EVERY 2 EVENTS;", "this OUTPUT limit decides as rows come"),
    ],
)
def test_without_a_time_such_a_reader_is_refused_with_the_fix(reader: str, where: str) -> None:
    untimed = f"INSERT INTO m SELECT e1.ip AS ip, e2.v AS v {PAIRS} PARTITION BY ip;\n"
    with pytest.raises(CompileError) as info:
        _graph(reader, untimed)
    message = str(info.value)
    assert where in message and "match_time() AS t" in message
    assert ":7:" in message  # the reader's line (after the five declarations and the pattern)


def test_the_reference_reads_them_once_the_watermark_has_passed_them() -> None:
    t = Timeline(
        PARTITIONED + "INSERT INTO o SELECT count(*) AS n, max(v) AS v FROM m WINDOW TUPLE SIZE 2;",
        streams=STREAMS,
    )
    out = t.event(100, "a", 1) + t.event(200, "a", 2) + t.event(300, "b", 1) + t.event(400, "b", 5)
    assert out == []  # b's match at 400 is not passed yet; a's at 200 waits in the window
    assert t.wm(401) == [(2, 5)]  # both passed: a's then b's, in time order
    assert t.event(500, "a", 9) + t.finish() == []  # a's match at 500: the final watermark has not passed it


JOIN = (
    "INSERT INTO j SELECT a.ip AS ip, a.v AS v, b.v AS w, a.ts AS ts FROM s AS a WINDOW TIME SIZE 1 SECOND, "
    "s AS b WINDOW TIME SIZE 1 SECOND WHERE a.ip = b.ip"
)


@pytest.mark.parametrize(
    ("statements", "reorders", "limits_in_order"),
    [
        (f"{JOIN};\nINSERT INTO w SELECT count(*) AS n FROM j WINDOW TUPLE SIZE 3;", 1, 0),
        (f"{JOIN};\nINSERT INTO TABLE by_ip SELECT ip, v FROM j;", 1, 0),  # no partition key here
        (f"{JOIN};\nINSERT INTO w SELECT count(*) AS n FROM j WINDOW TIME SIZE 1 SECOND;", 0, 0),
        (f"{JOIN} OUTPUT FIRST EVERY 2 EVENTS;", 0, 1),  # the join's own limit waits
        (f"{JOIN} OUTPUT LAST EVERY 2 SECONDS;", 0, 0),  # chooses by time when it ticks
        (f"{JOIN};\nINSERT INTO w SELECT ip FROM j OUTPUT EVERY 2 EVENTS;", 0, 1),
    ],
)
def test_what_reads_a_joins_pairs_in_time_order(statements: str, reorders: int, limits_in_order: int) -> None:
    graph = compile_script(STREAMS + statements).graph
    assert len(_reorders(graph)) == reorders
    rates = [n for n in graph.nodes if isinstance(n, OutputRate) and not n.reorders]
    assert sum(n.in_time_order for n in rates) == limits_in_order


def test_a_limit_on_a_join_without_its_time_selected_takes_the_pairs_time() -> None:
    graph = compile_script(STREAMS + JOIN.replace(", a.ts AS ts", "") + " OUTPUT EVERY 2 EVENTS;").graph
    (rate,) = [n for n in graph.nodes if isinstance(n, OutputRate)]
    assert rate.in_time_order and rate.time_index == len(rate.input_schema) - 1  # a hidden $time
    assert [f.name for f in rate.schema] == ["ip", "v", "w"]


def test_a_reader_of_pairs_without_their_time_is_refused_with_the_fix() -> None:
    with pytest.raises(CompileError) as info:
        compile_script(
            STREAMS
            + JOIN.replace(", a.ts AS ts", "")
            + ";\nINSERT INTO w SELECT count(*) AS n FROM j WINDOW TUPLE SIZE 3;"
        )
    message = str(info.value)
    assert "which come from the join at line 6" in message
    assert "select the left stream's event-time field" in message


@pytest.mark.parametrize(
    ("statements", "in_order"),
    [
        (f"{JOIN};\nINSERT INTO p SELECT a.v AS x FROM PATTERN EVERY a=j -> b=j[w > a.w];", True),
        (f"{PARTITIONED}INSERT INTO p SELECT a.v AS x FROM PATTERN EVERY a=m -> b=m[v > a.v];", True),
        (f"INSERT INTO p SELECT a.v AS x {PAIRS.replace('e1', 'a').replace('e2', 'b')};", False),
    ],
    ids=["over-a-join", "over-partitions", "over-a-source"],
)
def test_a_pattern_over_rows_out_of_time_order_waits_for_the_watermark(
    statements: str, in_order: bool
) -> None:
    graph = compile_script(STREAMS + statements).graph
    pattern = graph.node(graph.streams["p"].node)
    assert isinstance(pattern, g.Pattern)
    assert pattern.in_time_order is in_order
    assert ("in_time_order" in pattern.params()) is in_order  # cep explain shows it


SELF_JOINED = (
    "INSERT INTO j SELECT l.ip AS ip, l.ts AS ts, r.v AS w FROM s AS l WINDOW TIME SIZE 2 SECONDS, "
    "s AS r WINDOW TIME SIZE 1 MINUTE WHERE l.ip = r.ip;\n"
    "INSERT INTO p SELECT a.ip AS ip, b.w AS w FROM SEQUENCE (a=s AND b=j) PARTITION BY ip;\n"
)


@pytest.mark.parametrize(
    ("later", "taken"), [(None, []), (70_000, [("x", 1)])], ids=["ends-there", "goes-on"]
)
def test_at_the_end_a_pattern_over_a_join_takes_nothing_past_the_joins_final_watermark(
    later: int | None, taken: list[tuple[str, int]]
) -> None:
    """The join's output ends a window's size (here a minute) behind the stream beside it in the
    pattern; the match of an event at 0 is made only if the input goes on past that (fuzzer seed
    1412: the reference took it, where Spark's watermark, the least of its streams', held it)."""
    t = Timeline(SELF_JOINED, STREAMS, watch="p")
    t.event(0, "x", 1)
    t.event(10_000, "z", 3)  # the stream beside the join goes on past 0, not a minute past it
    if later is not None:
        t.event(later, "y", 2)
    t.finish()
    assert t.all.get("p", []) == taken
