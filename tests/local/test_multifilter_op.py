"""MultiFilter: sibling WHERE-only statements are fused; one pass, t goes to every Oi whose Pi holds."""

from __future__ import annotations

from cpl.compiler import compile_script
from operators.graph import MultiFilter

SCRIPT = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, duration integer;
INSERT INTO short_calls SELECT * FROM cdr WHERE duration < 10;
INSERT INTO long_calls SELECT * FROM cdr WHERE duration > 100;
INSERT INTO caller_one SELECT * FROM cdr WHERE idcaller = 1;
"""


def test_compiles_to_one_multifilter() -> None:
    graph = compile_script(SCRIPT).graph
    assert [n.op for n in graph.nodes].count("MultiFilter") == 1
    mf = next(n for n in graph.nodes if isinstance(n, MultiFilter))
    assert mf.outputs == 3


def test_each_event_goes_to_every_matching_output(run) -> None:
    ex = run(
        SCRIPT,
        [
            ("cdr", (1, 5)),  # short and caller_one
            ("cdr", (2, 50)),  # none: counted as filtered
            ("cdr", (1, 500)),  # long and caller_one
            ("cdr", (3, None)),  # NULL duration: no comparison holds
            ("cdr", (2, 1)),  # short
        ],
    )
    assert ex.outputs["short_calls"] == [(1, 5), (2, 1)]
    assert ex.outputs["long_calls"] == [(1, 500)]
    assert ex.outputs["caller_one"] == [(1, 5), (1, 500)]
    assert ex.stats.total_filtered == 2


def test_an_error_in_any_predicate_dead_letters_the_event_once(run) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH a integer, b integer;
    INSERT INTO o1 SELECT * FROM s WHERE a > 0;
    INSERT INTO o2 SELECT * FROM s WHERE a / b > 1;
    """
    ex = run(script, [("s", (4, 2)), ("s", (4, 0)), ("s", (-1, 1))])
    assert ex.outputs["o1"] == [(4, 2)]
    assert ex.outputs["o2"] == [(4, 2)]
    assert [(d.stage, d.event) for d in ex.dead_letters] == [("MultiFilter", (4, 0))]
