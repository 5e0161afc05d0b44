"""The rule that decides whether a changed script may resume from a deployment's checkpoint."""

from __future__ import annotations

import dataclasses

from service_helpers import CALLS

from cpl.compiler import compile_script
from deployer.spark.run import compat
from deployer.spark.run.compat import incompatibilities
from operators import graph as g

BINDINGS = {"sources": {"calls": "file:in"}, "sinks": {"priced": "file:out", "per_caller": "file:agg"}}


def why(new: str, old: str = CALLS, old_b: dict = BINDINGS, new_b: dict = BINDINGS) -> list[str]:
    return incompatibilities(compile_script(old).graph, old_b, compile_script(new).graph, new_b)


def test_identical_and_stateless_changes_are_compatible() -> None:
    assert why(CALLS) == []
    assert why(CALLS.replace("duration >= 10", "duration >= 20")) == []  # a filter
    assert why(CALLS.replace("duration * 2 AS cost", "duration * 3 AS cost")) == []  # a projection
    assert why("-- a comment moves every line\n\n" + CALLS) == []


def test_a_new_output_is_compatible() -> None:
    more = (
        CALLS
        + "INSERT INTO shortest SELECT caller, min(duration) AS d FROM calls WINDOW per_minute GROUP BY caller;\n"
    )
    sinks = {**BINDINGS["sinks"], "shortest": "file:short"}
    assert why(more, new_b={**BINDINGS, "sinks": sinks}) == []


def test_a_changed_window_is_not() -> None:
    problems = why(CALLS.replace("SIZE 1 MINUTE ADVANCE 1 MINUTE", "SIZE 1 HOUR ADVANCE 1 HOUR"))
    assert problems == [
        "output sink 'per_caller': the window aggregate of line 5: window changed from "
        "TIME SIZE 1 MINUTE ADVANCE 1 MINUTE to TIME SIZE 1 HOUR ADVANCE 1 HOUR"
    ]


def test_a_changed_group_by_or_aggregate_is_not() -> None:
    by_id = why(
        CALLS.replace("SELECT caller, sum(cost) AS total", "SELECT id, sum(cost) AS total").replace(
            "GROUP BY caller", "GROUP BY id"
        )
    )
    assert len(by_id) == 1 and "group by changed from caller integer to id integer" in by_id[0]
    count = why(CALLS.replace("sum(cost)", "count(*)"))
    assert len(count) == 1 and "aggregates changed" in count[0]


def test_a_changed_source_schema_or_binding_is_not() -> None:
    wider = why(CALLS.replace("duration integer,", "duration bigint,"))
    assert any("input stream 'calls': schema changed" in p for p in wider)
    moved = why(CALLS, new_b={**BINDINGS, "sources": {"calls": "file:elsewhere"}})
    assert any("source changed from file:in to file:elsewhere" in p for p in moved)


def test_an_added_or_removed_stateful_operator_is_not() -> None:
    plain = CALLS.replace(
        "INSERT INTO per_caller SELECT caller, sum(cost) AS total FROM priced WINDOW per_minute GROUP BY caller;",
        "INSERT INTO per_caller SELECT caller, cost AS total FROM priced;",
    )
    removed = "output sink 'per_caller': its stateful operators changed from [the window aggregate of line 5] to [none]"
    # (and without state, per_caller would share a query with priced: test_a_sink_moving_into...)
    assert why(plain)[0] == removed
    added = "output sink 'per_caller': its stateful operators changed from [none] to [the window aggregate of line 5]"
    assert why(CALLS, old=plain)[0] == added


def test_a_changed_join_is_not() -> None:
    join = """
    CREATE STREAMSCHEMA a WITH k integer, v varchar, t timestamp TIMESTAMP BY t;
    CREATE STREAMSCHEMA b WITH k integer, w varchar, t timestamp TIMESTAMP BY t;
    INSERT INTO j SELECT a.t AS t, a.v, b.w
      FROM a WINDOW TIME SIZE 10 SECONDS, b WINDOW TIME SIZE 5 SECONDS WHERE a.k = b.k;
    """
    b = {"sources": {"a": "file:a", "b": "file:b"}, "sinks": {"j": "file:j"}}
    assert why(join, join, b, b) == []
    problems = why(join.replace("5 SECONDS", "1 MINUTE"), join, b, b)
    assert len(problems) == 1 and "the join of line 4: windows changed" in problems[0]


def test_a_tuple_window_whose_state_changes_layout_is_not() -> None:
    # On Spark, a TUPLE window over numbers keeps its groups' state per bucket of groups
    # (deployer.spark.windows.tuple_buckets), one over a decimal per group: the checkpoint of one cannot feed the other.
    tuple_window = CALLS.replace("TIME SIZE 1 MINUTE ADVANCE 1 MINUTE", "TUPLE SIZE 3 ADVANCE 3")
    as_decimal = tuple_window.replace("sum(cost)", "sum(CAST(cost AS decimal(12, 2)))")
    problems = why(as_decimal, old=tuple_window)
    assert any("state changed from per bucket of groups, Arrow IPC to none" in p for p in problems), problems
    assert why(tuple_window.replace("sum(cost)", "max(cost)"), old=tuple_window) != []
    assert why(tuple_window, old=tuple_window) == []


def test_a_new_stateless_sink_is_compatible_and_one_leaving_the_shared_query_is_not() -> None:
    """Two or more stateless sinks share one query (deployer.spark.run.stateless_groups): a sink the
    next version adds keeps a query of its own when it is the only one, and those it adds together
    share one of their own generation, so a deployment takes new rules; a started shared query
    keeps its sinks, even one alone; one that leaves it for a query of its own would be written
    again from the beginning."""
    second = CALLS + "INSERT INTO free SELECT id, caller FROM calls WHERE duration < 10;\n"
    with_free = {**BINDINGS, "sinks": {**BINDINGS["sinks"], "free": "file:free"}}
    assert why(second, new_b=with_free) == []  # beside one that had a query of its own: its own too
    more = "INSERT INTO odd SELECT id FROM calls WHERE id % 2 = 1;\n"
    with_odd = {**with_free, "sinks": {**with_free["sinks"], "odd": "file:odd"}}
    assert why(second + more, second, with_free, with_odd) == []
    more += "INSERT INTO even SELECT id FROM calls WHERE id % 2 = 0;\n"
    with_even = {**with_odd, "sinks": {**with_odd["sinks"], "even": "file:even"}}
    assert why(second + more, second, with_free, with_even) == []
    # as the run on the old script's checkpoint plans them: the started query keeps its sinks,
    # the two new ones share the next
    was = compat.stateless_shares(compile_script(second).graph, with_free["sinks"])
    assert was == {"sinks:stateless": ["sink 'priced'", "sink 'free'"]}
    now = compat.stateless_shares(
        compile_script(second + more).graph, with_even["sinks"], compat.sinks_of(was)
    )
    assert now == {
        "sinks:stateless": ["sink 'priced'", "sink 'free'"],
        "sinks:stateless~2": ["sink 'odd'", "sink 'even'"],
    }
    assert why(CALLS, second, with_free, BINDINGS) == []  # one fewer: the other stays in its query
    # one that now needs state would leave the shared query for one of its own
    windowed = second.replace(
        "SELECT id, caller FROM calls WHERE duration < 10",
        "SELECT caller, count(*) AS n FROM calls WINDOW per_minute GROUP BY caller",
    )
    assert (
        "output sink 'free' was written by the query sinks:stateless shared with other stateless sinks, "
        "and would now have a query of its own, which would write it again from the beginning"
    ) in why(windowed, second, with_free, with_free)
    # the checks behind the plan: a sink that had a query of its own, or joined a started one
    assert compat.regrouped(
        {"sinks:stateless": ["sink 'free'"]},
        {"sinks:stateless": ["sink 'free'", "sink 'odd'", "sink 'priced'"]},
        {"sink 'priced'"},
        set(),
        kind="stateless sinks",
    ) == [
        "output sink 'odd' would join the query sinks:stateless of the stateless sinks sink 'free', which "
        "resumes where it stopped, so it would miss the events read before",
        "output sink 'priced' was written by a query of its own, and would now share the query "
        "sinks:stateless with other stateless sinks",
    ]


def test_a_new_pattern_sink_beside_started_ones_is_compatible_and_a_moved_one_is_not() -> None:
    """The sinks of patterns over the same streams share a query (deployer.spark.run.pattern_groups):
    one the next version adds shares a query of its own generation, which reads the streams from
    the beginning, so a deployment takes new rules; one whose pattern now reads other streams would
    move to another query, which resumes elsewhere."""
    rule = "INSERT INTO {0} SELECT e1.id AS a, e2.id AS b FROM PATTERN EVERY e1=calls -> e2=calls[duration > {1}];\n"
    two = CALLS + rule.format("long_after", 60) + rule.format("longer_after", 120)
    sinks = {**BINDINGS["sinks"], "long_after": "file:l", "longer_after": "file:m"}
    three = two + rule.format("longest_after", 300)
    with_three = {**BINDINGS, "sinks": {**sinks, "longest_after": "file:n"}}
    assert why(three, two, {**BINDINGS, "sinks": sinks}, with_three) == []
    assert why(two, three, with_three, {**BINDINGS, "sinks": sinks}) == []  # one fewer: the others resume
    over_priced = two.replace("e2=calls[duration > 120]", "e2=priced[cost > 120]")
    problems = why(over_priced, two, {**BINDINGS, "sinks": sinks}, {**BINDINGS, "sinks": sinks})
    assert (
        "output sink 'longer_after' was written by the query patterns:calls shared with other pattern "
        "sinks, and would now have a query of its own, which would write it again from the beginning"
    ) in problems


def test_a_limit_whose_state_moves_between_sparks_window_and_the_limiter_is_not() -> None:
    # On Spark, ALL and LAST EVERY duration over a TIME window keep their buckets in the window's
    # own aggregation (deployer.spark.windows.time_window_limit), or after a HAVING that can fail in a second
    # window aggregation of Spark's own (deployer.spark.output.in_window), the other limits in the
    # limiter's processor: a checkpoint of one cannot feed another.
    last = CALLS.replace("GROUP BY caller;", "GROUP BY caller OUTPUT LAST EVERY 2 MINUTES;")
    first = last.replace("OUTPUT LAST", "OUTPUT FIRST")
    problems = why(first, old=last)
    assert any("state changed from the window's aggregation to none" in p for p in problems), problems
    having = last.replace("GROUP BY caller OUTPUT", "GROUP BY caller HAVING 100 / sum(cost) < 5 OUTPUT")
    problems = why(last, old=having)
    assert any(
        "state changed from Spark's window aggregation to the window's aggregation" in p for p in problems
    ), problems
    assert any("state changed from Spark's window aggregation to none" in p for p in why(first, old=having))
    assert why(last.replace("OUTPUT LAST", "OUTPUT ALL"), old=last) != []  # the clause itself
    assert why(last, old=last) == []
    assert why(having, old=having) == []


def test_a_limit_whose_state_moves_into_a_tuple_windows_processor_is_not() -> None:
    # ALL and LAST EVERY duration over a TUPLE or BATCH window without HAVING keep their rows in
    # the window's own processor (deployer.spark.windows.window_limit); with a HAVING, the limiter
    # has a processor of its own: a checkpoint of one cannot feed the other.
    held = CALLS.replace(
        "WINDOW per_minute GROUP BY caller;",
        "WINDOW TUPLE SIZE 3 GROUP BY caller OUTPUT LAST EVERY 2 MINUTES;",
    )
    own = held.replace("GROUP BY caller OUTPUT", "GROUP BY caller HAVING sum(cost) > 0 OUTPUT")
    problems = why(own, old=held)
    assert any("state changed from the window's processor to none" in p for p in problems), problems
    assert why(held, old=held) == []


def test_a_reader_that_now_takes_a_joins_pairs_in_time_order_is_not() -> None:
    """A deployment from before the planner put the rows of a join in time order for a TUPLE window
    (cpl.plan_order) kept no state for it: refused, and the message names it."""
    script = (
        "CREATE STREAMSCHEMA calls WITH caller integer, duration integer, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO pairs SELECT a.caller AS caller, b.duration AS d, a.ts AS ts FROM calls AS a WINDOW TIME "
        "SIZE 1 MINUTE, calls AS b WINDOW TIME SIZE 1 MINUTE WHERE a.caller = b.caller;\n"
        "INSERT INTO recent SELECT caller, sum(d) AS total FROM pairs WINDOW TUPLE SIZE 3 GROUP BY caller;\n"
    )
    old = compile_script(script).graph
    nodes = tuple(n for n in old.nodes if n.op != "OutputRate")  # as planned before: no such node
    agg = next(n for n in nodes if n.op == "Aggregate")
    join = next(n for n in nodes if n.op == "Join")
    before = dataclasses.replace(
        old,
        nodes=tuple(dataclasses.replace(agg, inputs=(g.Port(join.id),)) if n is agg else n for n in nodes),
    )
    bindings = {"sources": {"calls": "file:in"}, "sinks": {"recent": "file:out"}}
    problems = incompatibilities(before, bindings, old, bindings)
    assert any("the time order of the rows of line 2" in p for p in problems), problems
