"""Which stateless sinks share a query, given what a checkpoint started (deployer.spark.run.
stateless_groups): the plan alone, no Spark."""

from __future__ import annotations

from typing import Any

from spark_helpers import compile_text

from deployer.spark.run.stateless_groups import SHARED_QUERY, is_shared, stateless_groups

SCRIPT = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer;
INSERT INTO a SELECT id FROM calls WHERE duration < 10;
INSERT INTO b SELECT id FROM calls WHERE duration >= 20;
INSERT INTO c SELECT id FROM calls WHERE id % 2 = 1;
INSERT INTO d SELECT id FROM calls WHERE id % 2 = 0;
INSERT INTO per_caller SELECT caller, count(*) AS n FROM calls WINDOW TUPLE SIZE 3 GROUP BY caller;
"""


def _groups(sinks: list[str], started: Any = None) -> dict[str, tuple[str, ...]]:
    return dict(stateless_groups(compile_text(SCRIPT), sinks, started))


def test_without_a_checkpoint_two_or_more_share_one_query() -> None:
    assert _groups(["d", "a", "per_caller", "b"]) == {SHARED_QUERY: ("a", "b", "d")}  # script order
    assert _groups(["a", "per_caller"]) == {}  # one alone has its own; a window is no stateless sink


def test_a_started_query_keeps_its_sinks_and_new_ones_share_the_next() -> None:
    started = {SHARED_QUERY: {"a", "b"}}
    assert _groups(["a", "b", "c"], started) == {SHARED_QUERY: ("a", "b")}  # c alone: its own
    assert _groups(["a", "b", "c", "d"], started) == {
        SHARED_QUERY: ("a", "b"),
        f"{SHARED_QUERY}~2": ("c", "d"),
    }
    assert _groups(["b"], started) == {SHARED_QUERY: ("b",)}  # the last one left stays in it
    # the generation after the last started one, whatever has started between
    later = {SHARED_QUERY: {"a"}, f"{SHARED_QUERY}~3": {"b"}}
    assert _groups(["a", "b", "c", "d"], later) == {
        SHARED_QUERY: ("a",),
        f"{SHARED_QUERY}~3": ("b",),
        f"{SHARED_QUERY}~4": ("c", "d"),
    }


def test_a_sink_that_had_a_query_of_its_own_keeps_it() -> None:
    started = {"sink:a": {"a"}, "patterns:calls": {"x"}}
    assert _groups(["a", "b"], started) == {}
    assert _groups(["a", "b", "c"], started) == {SHARED_QUERY: ("b", "c")}


def test_the_shared_queries_are_known_by_name() -> None:
    assert is_shared(SHARED_QUERY) and is_shared(f"{SHARED_QUERY}~12")
    assert not is_shared("sink:stateless") and not is_shared("patterns:calls")
