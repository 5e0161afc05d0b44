"""Live fields (operators.analysis): what each port's consumers read, worked out on compiled
scripts without Spark. A field wrongly left out would come back NULL where a consumer reads it, so
every rule that keeps a field has a case here."""

from __future__ import annotations

from cpl.compiler import compile_script
from operators import graph as g
from operators.analysis import Live, live_fields

HEAD = """
CREATE STREAMSCHEMA s WITH a integer, b integer, c integer, t varchar;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY q ON crm AS 'SELECT x, y FROM lk WHERE k = ?' RETURNS (x varchar, y varchar);
CREATE SQLQUERY qt ON crm AS 'SELECT x, y FROM lk WHERE name = ?' RETURNS (x varchar, y varchar);
CREATE SQLQUERY qi ON crm AS 'SELECT x, y FROM lk WHERE k = ?' RETURNS (x integer, y integer);
"""
# q and qt read varchar results, which no value can fail to fit (every value has a text form);
# qi's integers may not fit what the store returns (operators.analysis.unfit_results). Any of them
# may have an event's read refused by the store (a bad cast in its SQL, a NUL in text for
# PostgreSQL), which dead-letters the event whole: a ReadSQL's input is always wholly live.


def read_live(script: str) -> list[Live]:
    """The live fields of each ReadSQL's output, then of its input, in graph order."""
    graph = compile_script(HEAD + script).graph
    live = live_fields(graph)
    out: list[Live] = []
    for n in graph.nodes:
        if isinstance(n, g.ReadSQL):
            out += [live.get(g.Port(n.id)), live.get(n.inputs[0])]
    return out


def test_a_map_after_the_read_keeps_what_it_reads_and_the_argument() -> None:
    # s: a 0, b 1, c 2, t 3; the read adds x 4, y 5. The WHERE runs before the read (it reads only
    # the event), so the read's input is the filter's output, not the stream s.
    got = read_live("INSERT INTO o SELECT a, r.y FROM s ON SQL q, r, b, x, y WHERE c > 0;")
    assert got == [frozenset({0, 5}), None]


def test_an_expression_that_can_fail_keeps_every_field_for_its_dead_letter() -> None:
    safe = "INSERT INTO o SELECT t = r.y AS z FROM s ON SQL q, r, b, x, y WHERE c > 0;"
    assert read_live(safe) == [frozenset({3, 5}), None]
    divides = "INSERT INTO o SELECT a / c AS z, r.y FROM s ON SQL q, r, b, x, y WHERE c > 0;"
    assert read_live(divides) == [None, None]


def test_every_read_keeps_every_field_of_its_input() -> None:
    # varchar results, integers that may not fit, a text argument: whatever the store refuses
    # dead-letters the event, whole; what reads the read's output is as before
    for script, out in [
        ("INSERT INTO o SELECT a, r.y FROM s ON SQL q, r, b, x, y WHERE c > 0;", {0, 5}),
        ("INSERT INTO o SELECT a, r.y FROM s ON SQL qi, r, b, x, y WHERE c > 0;", {0, 5}),
        ("INSERT INTO o SELECT a FROM s ON SQL qt, r, t, x, y WHERE c > 0;", {0}),
    ]:
        assert read_live(script) == [frozenset(out), None]


def test_a_named_stream_is_wholly_live() -> None:
    script = """
    INSERT INTO mid SELECT a, c, r.x FROM s ON SQL q, r, b, x, y;
    INSERT INTO o SELECT a FROM mid WHERE x > '1';
    """
    # mid is a stream of the script (a sink or a test may read it): all of a, c and x; s too
    assert read_live(script) == [frozenset({0, 2, 4}), None]


def test_a_filter_after_the_read_adds_what_it_tests() -> None:
    script = "INSERT INTO o SELECT a FROM s ON SQL q, r, b, x, y WHERE r.y > t;"
    assert read_live(script)[0] == frozenset({0, 3, 5})


def test_an_aggregate_after_the_read_keeps_every_field() -> None:
    script = """
    CREATE WINDOW w AS TUPLE SIZE 3 ADVANCE 3;
    INSERT INTO o SELECT a, count(r.x) AS n FROM s WINDOW w ON SQL q, r, b, x, y WHERE c > 0 GROUP BY a;
    """
    assert read_live(script) == [None, None]
