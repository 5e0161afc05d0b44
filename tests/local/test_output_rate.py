"""OUTPUT rate limiting on the reference executor: each rule of ../shared/SIDDHI-SEMANTICS.md §4 with
the rows of the Siddhi test it was read off, in event time (docs/language.md, "Output rate limiting").
Events are (ms, ip, v); `ips` reads the ip of each row that came out."""

from __future__ import annotations

import pytest
from output_helpers import STREAM, UNTIMED, Timeline, at, ips, run_all

from cpl.compiler import compile_script
from cpl.errors import CompileError
from deployer.local.executor import LocalExecutor

EIGHT = [(i * 10, f".{i}", i) for i in range(1, 9)]


# ---- EVERY n EVENTS --------------------------------------------------------------------------------


def test_all_every_n_events_emits_whole_buckets_and_never_a_partial_one() -> None:
    t = Timeline("INSERT INTO o SELECT ip, v FROM s OUTPUT EVERY 5 EVENTS;")
    seen = [t.event(*e) for e in EIGHT]
    # the 5th row (released by the 6th event's watermark) sends rows 1-5 in one go, none before
    assert seen[:5] == [[]] * 5
    assert ips(seen[5]) == [".1", ".2", ".3", ".4", ".5"]
    assert t.wm(10_000) == [] and t.finish() == []  # rows 6-8: a partial bucket, even at the end


def test_all_is_the_default_kind() -> None:
    written = run_all("INSERT INTO o SELECT ip FROM s OUTPUT ALL EVERY 3 EVENTS;", EIGHT)
    default = run_all("INSERT INTO o SELECT ip FROM s OUTPUT EVERY 3 EVENTS;", EIGHT)
    assert written == default and ips(written) == [".1", ".2", ".3", ".4", ".5", ".6"]


def test_first_every_n_events_emits_rows_1_n_plus_1_and_the_first_of_an_unfinished_bucket() -> None:
    twelve = [(i * 10, f".{i}", i) for i in range(1, 13)]
    t = Timeline("INSERT INTO o SELECT ip FROM s OUTPUT FIRST EVERY 5 EVENTS;")
    out = []
    for e in twelve:
        out += t.event(*e)
    assert ips(out) == [".1", ".6", ".11"]  # .11 starts a bucket that never fills; out at once
    assert t.finish() == []


def test_first_counts_per_group() -> None:
    events = [
        (10, "a", 1),
        (20, "b", 1),
        (30, "a", 2),
        (40, "a", 3),
        (50, "b", 2),
        (60, "b", 3),
        (70, "b", 4),
    ]
    got = run_all("INSERT INTO o SELECT ip, v FROM s GROUP BY ip OUTPUT FIRST EVERY 2 EVENTS;", events)
    assert got == [("a", 1), ("b", 1), ("a", 3), ("b", 3)]  # each group's 1st and 3rd


def test_last_every_n_events_emits_rows_n_2n_and_drops_the_rest() -> None:
    got = run_all("INSERT INTO o SELECT ip FROM s OUTPUT LAST EVERY 3 EVENTS;", EIGHT)
    assert ips(got) == [".3", ".6"]


def test_last_with_group_by_keeps_one_counter_and_emits_each_groups_latest_in_first_seen_order() -> None:
    events = [
        (10, "a", 1),
        (20, "b", 1),
        (30, "a", 2),
        (40, "b", 2),
        (50, "c", 1),
        (60, "b", 3),
        (70, "a", 3),
    ]
    got = run_all("INSERT INTO o SELECT ip, v FROM s GROUP BY ip OUTPUT LAST EVERY 3 EVENTS;", events)
    # bucket 1 (a1 b1 a2): a first seen, then b; bucket 2 (b2 c1 b3); a3 is a partial bucket
    assert got == [("a", 2), ("b", 1), ("b", 3), ("c", 1)]


def test_a_count_limit_needs_no_event_time() -> None:
    ex = LocalExecutor(
        compile_script(UNTIMED + "INSERT INTO o SELECT ip FROM u OUTPUT FIRST EVERY 2 EVENTS;").graph
    )
    ex.run({"u": [(f".{i}", i) for i in range(1, 6)]})
    assert ex.outputs["o"] == [(".1",), (".3",), (".5",)]


# ---- EVERY duration ----------------------------------------------------------------------------------


def test_all_every_t_flushes_on_event_time_ticks_and_an_empty_tick_emits_nothing() -> None:
    t = Timeline("INSERT INTO o SELECT ip FROM s OUTPUT EVERY 1 SECOND;")
    assert t.event(100, ".5", 0) + t.event(500, ".3", 0) == []
    assert ips(t.wm(1000)) == [".5", ".3"]
    assert t.event(1100, ".9", 0) + t.event(1500, ".4", 0) == []
    assert ips(t.wm(2000)) == [".9", ".4"]
    assert t.event(2100, ".30", 0) == []
    assert ips(t.wm(3000)) == [".30"]
    assert t.wm(4000) == []  # no row in [3000, 4000)
    assert t.event(4200, ".40", 0) == []
    assert ips(t.wm(5000)) == [".40"]


def test_a_row_exactly_on_a_tick_belongs_to_the_bucket_that_starts_there() -> None:
    t = Timeline("INSERT INTO o SELECT ip FROM s OUTPUT EVERY 1 SECOND;")
    assert t.event(999, "before", 0) == []
    assert ips(t.event(1000, "on", 0)) == ["before"]  # this event's watermark reaches the tick
    assert t.wm(1999) == []
    assert ips(t.wm(2000)) == ["on"]


def test_ticks_are_aligned_to_the_epoch_not_to_the_first_row() -> None:
    t = Timeline("INSERT INTO o SELECT ip FROM s OUTPUT EVERY 10 SECONDS;")
    t.event(9_000, "x", 0)
    assert ips(t.wm(10_000)) == ["x"]  # one second after the first row: the tick at 10 s


def test_last_every_t_emits_the_last_row_of_each_bucket() -> None:
    t = Timeline("INSERT INTO o SELECT ip FROM s OUTPUT LAST EVERY 1 SECOND;")
    assert t.event(100, ".1", 0) + t.event(600, ".2", 0) == []
    assert ips(t.wm(1000)) == [".2"]
    assert t.event(1100, ".3", 0) + t.event(1200, ".4", 0) + t.event(1900, ".5", 0) == []
    assert ips(t.wm(2000)) == [".5"]
    assert t.wm(3000) == []


def test_last_every_t_with_group_by_emits_each_groups_latest_row_since_the_last_tick() -> None:
    t = Timeline("INSERT INTO o SELECT ip, v FROM s GROUP BY ip OUTPUT LAST EVERY 1 SECOND;")
    for e in [(100, "a", 1), (200, "b", 1), (300, "a", 2)]:
        t.event(*e)
    assert t.wm(1000) == [("a", 2), ("b", 1)]
    for e in [(1100, "b", 2), (1200, "b", 3)]:
        t.event(*e)
    assert t.wm(2000) == [("b", 3)]  # a had no row in [1000, 2000)


def test_first_every_t_lets_a_row_out_at_once_when_t_has_passed_since_the_last_one_of_its_group() -> None:
    events = [(0, "a", 1), (400, "a", 2), (1000, "a", 3), (1500, "b", 1), (1900, "a", 4), (2000, "a", 5)]
    t = Timeline("INSERT INTO o SELECT ip, v FROM s GROUP BY ip OUTPUT FIRST EVERY 1 SECOND;")
    out = []
    for e in events:
        out += t.event(*e)
    # exactly T after the last emitted row is enough; b has its own clock; no tick was needed
    assert out == [("a", 1), ("a", 3), ("b", 1)]
    assert t.finish() == [("a", 5)]  # released by the end of input, not held back by the limiter


def test_a_partial_time_bucket_is_dropped_at_the_end_of_input_as_an_incomplete_time_window_is() -> None:
    statements = (
        "INSERT INTO o SELECT ip FROM s OUTPUT EVERY 1 SECOND;\n"
        "INSERT INTO w SELECT count(*) AS n FROM s WINDOW TIME SIZE 1 SECOND;\n"
    )
    t = Timeline(statements)
    out = t.event(100, "early", 0) + t.event(1200, "late", 0) + t.finish()
    # the input's final watermark is 1200: the tick at 1000 happens, the one at 2000 does not
    assert ips(out) == ["early"]
    assert t.all["w"] == [(1,)]  # the window [1000, 2000) does not fire either


def test_first_keeps_its_event_time_and_a_window_after_the_limiter_misses_no_row() -> None:
    statements = (
        "INSERT INTO o SELECT ip, ts FROM s GROUP BY ip OUTPUT FIRST EVERY 2 SECONDS;\n"
        "INSERT INTO w SELECT count(*) AS n FROM o WINDOW TIME SIZE 1 SECOND;\n"
    )
    t = Timeline(statements)
    for ms, ip in ((100, "a"), (200, "b"), (1100, "a"), (2500, "a"), (2600, "b"), (3900, "b"), (4100, "a")):
        t.event(ms, ip, 0)
    t.wm(6000)
    t.finish()
    # let through: a@100, b@200, a@2500, b@2600 (a@1100, b@3900 and a@4100 come less than 2 s after
    # their group's last row let through)
    assert t.all["w"] == [(2,), (2,)]
    assert t.ex.dead_letters == []


@pytest.mark.parametrize("kind", ["ALL", "LAST"])
def test_the_output_of_a_limiter_that_holds_rows_has_no_event_time(kind: str) -> None:
    # its rows leave after later ones came in: a window after it is refused, with the reason
    script = (
        STREAM + f"INSERT INTO o SELECT ip, ts FROM s OUTPUT {kind} EVERY 2 SECONDS;\n"
        "INSERT INTO w SELECT count(*) AS n FROM o WINDOW TIME SIZE 1 SECOND;\n"
    )
    with pytest.raises(CompileError) as info:
        compile_script(script)
    message = str(info.value)
    assert "a TIME window needs event time" in message and "OUTPUT ALL, LAST or SNAPSHOT" in message
    assert "line 2" in message


def test_a_windowed_aggregate_row_belongs_to_the_bucket_of_the_last_instant_its_window_covers() -> None:
    t = Timeline(
        "INSERT INTO o SELECT ip, sum(v) AS total FROM s WINDOW TIME SIZE 1 SECOND GROUP BY ip "
        "OUTPUT LAST EVERY 2 SECONDS;"
    )
    for e in [(100, "a", 1), (200, "b", 10), (1100, "a", 2), (1200, "a", 3)]:
        assert t.event(*e) == []
    # windows [0, 1000) and [1000, 2000) both end by the tick at 2000: a's latest is the second
    assert t.wm(1999) == []
    assert t.wm(2000) == [("a", 5), ("b", 10)]


def test_a_pattern_statement_takes_an_output_clause_and_groups_by_what_it_matched() -> None:
    events = [(10, "a", 1), (20, "a", 2), (30, "b", 1), (40, "b", 5), (50, "a", 3), (60, "a", 4)]
    got = run_all(
        "INSERT INTO o SELECT e1.v AS v1, e2.v AS v2 FROM PATTERN EVERY e1=s -> e2=s[ip = e1.ip AND v > e1.v] "
        "GROUP BY e1.ip OUTPUT FIRST EVERY 2 EVENTS;",
        events,
    )
    # matches in order: a (1,2), b (1,5), a (2,3), a (3,4): per e1.ip, the 1st and 3rd
    assert got == [(1, 2), (1, 5), (3, 4)]


def test_an_output_row_without_its_group_key_in_the_select_still_counts_per_group() -> None:
    statement = "INSERT INTO o SELECT v FROM s GROUP BY ip OUTPUT FIRST EVERY 5 EVENTS;"
    t = Timeline(statement)
    assert [f.name for f in t.graph.stream_schema("o")] == ["v"]  # the key is no column of the output
    assert run_all(statement, [(10, "a", 1), (20, "b", 2), (30, "a", 3)]) == [(1,), (2,)]


def test_times_are_event_times_not_arrival() -> None:
    # events pushed out of order within the watermark delay still tick by their own times
    streams = (
        "CREATE STREAMSCHEMA s WITH ip varchar, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;\n"
    )
    ex = LocalExecutor(
        compile_script(streams + "INSERT INTO o SELECT ip FROM s OUTPUT EVERY 1 SECOND;").graph
    )
    for ms, ip in [(1500, "second"), (900, "first"), (2600, "third")]:
        ex.push("s", (ip, 0, at(ms)))
    ex.finish()  # final watermark 1600: only the tick at 1000
    assert ex.outputs["o"] == [("first",)]


def test_a_join_takes_an_output_clause_on_its_output_time() -> None:
    streams = "".join(
        f"CREATE STREAMSCHEMA {x} WITH k integer, ts timestamp TIMESTAMP BY ts;\n" for x in "ab"
    )
    statement = (
        "INSERT INTO o SELECT a.k AS k, a.ts AS ts FROM a WINDOW TIME SIZE 10 SECONDS, "
        "b WINDOW TIME SIZE 10 SECONDS WHERE a.k = b.k OUTPUT LAST EVERY 1 SECOND;"
    )
    ex = LocalExecutor(compile_script(streams + statement).graph)
    for ms, k in [(100, 1), (200, 2), (300, 3), (1200, 4)]:
        ex.push("a", (k, at(ms)))
        ex.push("b", (k, at(ms + 10)))
    for stream in "ab":
        ex.advance_watermark(stream, at(30_000))
    ex.finish()
    assert [k for k, _ in ex.outputs["o"]] == [3, 4]  # the last pair of [0, 1000), of [1000, 2000)


def test_a_time_limit_on_a_pattern_ticks_on_match_times_the_select_does_not_show() -> None:
    t = Timeline(
        "INSERT INTO o SELECT e1.v AS v1, e2.v AS v2 FROM PATTERN EVERY e1=s -> e2=s[v > e1.v] "
        "OUTPUT ALL EVERY 1 SECOND;"
    )
    assert t.event(100, "x", 1) + t.event(900, "x", 2) == []
    assert t.event(1000, "x", 0) == [(1, 2)]  # matched at 900: out at the tick at 1000
    assert t.event(1500, "x", 5) == []
    assert t.wm(1999) == []
    assert t.wm(2000) == [(2, 5), (0, 5)]  # both matched at 1500, the older partial first


def test_a_tuple_window_row_has_the_time_of_the_event_that_completed_it() -> None:
    t = Timeline(
        "INSERT INTO o SELECT ip, sum(v) AS total FROM s WINDOW TUPLE SIZE 2 GROUP BY ip OUTPUT ALL EVERY 1 SECOND;"
    )
    for e in [(100, "a", 1), (900, "b", 1), (1100, "a", 2)]:
        t.event(*e)
    assert t.wm(1000) == []  # a's window was completed at 1100: it belongs to [1000, 2000)
    t.event(1200, "b", 5)
    assert t.wm(2000) == [("a", 3), ("b", 6)]
