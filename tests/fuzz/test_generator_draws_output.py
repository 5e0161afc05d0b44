"""The fuzzer's generator draws every form of OUTPUT clause (docs/language.md, "Output rate limiting";
tests/fuzz/fuzz_output.py): generation only, no engine run, so that a form the generator stops
drawing fails here, not silently in a soak that no longer meets it. Every script it draws compiles
(the generator compiles each statement as it goes and raises GeneratorError otherwise)."""

from __future__ import annotations

import re

from fuzz_case import Case
from fuzz_coverage import OUTPUT_ROWS, Coverage, Row
from fuzz_draws import drawn_cases

from cpl.compiler import compile_script
from operators import graph as g
from operators.output_node import FIRST, OutputRate

# what each form looks like in a drawn statement
FORMS = {
    "ALL by default": r" OUTPUT EVERY \d+ \w+;",
    "ALL written out": r" OUTPUT ALL EVERY ",
    "FIRST": r" OUTPUT FIRST EVERY ",
    "LAST": r" OUTPUT LAST EVERY ",
    "SNAPSHOT": r" OUTPUT SNAPSHOT EVERY ",
    "EVERY n EVENTS": r" EVERY [1-5] EVENTS;",
    "EVERY 1 EVENTS": r" EVERY 1 EVENTS;",
    "EVERY 5 EVENTS": r" EVERY 5 EVENTS;",
    "EVERY ms": r" EVERY \d+ (ms|MILLISECONDS?);",
    "EVERY seconds": r" EVERY \d+ (sec|SECONDS?);",
    "EVERY minutes": r" EVERY \d+ (min|MINUTES?);",
    "after a TIME window": r" WINDOW (w\d+|TIME .*) OUTPUT ",
    "after a TUPLE window": r" WINDOW (w\d+|TUPLE .*) OUTPUT ",
    "after a BATCH window": r" WINDOW (w\d+|BATCH .*) OUTPUT ",
    "after HAVING": r" HAVING .* OUTPUT ",
    "GROUP BY without a window": r"^INSERT INTO [mf]\d+ SELECT (?!.* WINDOW ).* GROUP BY .* OUTPUT ",
    "GROUP BY k": r" GROUP BY k OUTPUT ",
    "GROUP BY an expression": r" GROUP BY \(.* OUTPUT ",
    "pattern GROUP BY": r" FROM (PATTERN|SEQUENCE) .* GROUP BY e\d.* OUTPUT ",
    "pattern with PARTITION BY": r" PARTITION BY k .*OUTPUT ",
    "join": r" AS l WINDOW .* AS r WINDOW .* OUTPUT ",
    "data store call": r" ON (OUTER )?SQL .* OUTPUT ",
}


def _drawn(n: int, targets: tuple[Row, ...], per_seed: int = 3, first_seed: int = 41000) -> list[Case]:
    return drawn_cases(n, targets, first_seed=first_seed, per_seed=per_seed)


def _limited(c: Case) -> list[str]:
    return [line for line in c.script.splitlines() if " OUTPUT " in line]


def test_the_generator_draws_every_form_of_output_clause() -> None:
    # each line is aimed at by three seeds or so, and about four seeds in five hit the line they
    # are aimed at (the others fall back to a statement of another line)
    drawn = _drawn(6 * len(OUTPUT_ROWS), OUTPUT_ROWS, per_seed=2)
    statements = {line for c in drawn for line in _limited(c)}
    assert len(statements) >= 100, f"only {len(statements)} distinct OUTPUT statements in {len(drawn)} cases"
    missing = [name for name, rx in FORMS.items() if not any(re.search(rx, s) for s in statements)]
    assert not missing, f"forms never drawn: {missing}"
    cov = Coverage()
    for c in drawn:
        cov.add(c.script, [], silent=False)
    never = [r for r in OUTPUT_ROWS if cov.had[r] == 0]
    assert not never, f"coverage lines never drawn: {never}"


def test_a_limited_statement_has_event_time_only_with_first() -> None:
    """ALL, LAST and SNAPSHOT output has no event time, so later statements read it only without
    one; FIRST's keeps the statement's, which a TIME window, a join or a pattern may read. Every
    limited stream is compared in order (the limiter is one ordered operator on both engines)."""
    # a later statement reads FIRST's output in time in some 2 cases in 100: enough cases that the
    # seeds' luck (which any change of the generator's draws, triggers' included, reshuffles) holds
    drawn = _drawn(3 * len(OUTPUT_ROWS), OUTPUT_ROWS, first_seed=42000)
    held_read = first_read_in_time = 0
    for c in drawn:
        graph = compile_script(c.script).graph
        limited = {n.id: n for n in graph.nodes if isinstance(n, OutputRate)}
        for n in limited.values():
            assert (n.event_time is not None) <= (n.kind == FIRST), c.script
        for stream, port in graph.streams.items():
            if port.node in limited and stream in c.sinks:
                assert c.ordered.get(stream) == [], (stream, c.ordered, c.script)
        for node in graph.nodes:
            read = [limited[p.node] for p in node.inputs if p.node in limited]
            timed = isinstance(node, g.Join | g.Pattern) or (
                isinstance(node, g.Aggregate) and node.window.kind == "time"
            )
            held_read += any(r.kind != FIRST for r in read)
            first_read_in_time += timed and any(r.kind == FIRST and r.event_time for r in read)
    assert held_read >= 5, "no statement read the output of ALL, LAST or SNAPSHOT"
    assert first_read_in_time >= 1, "no TIME window, join or pattern read FIRST's output"


def test_cases_not_aimed_draw_output_clauses_now_and_then() -> None:
    drawn = _drawn(120, (), first_seed=43000)
    with_clause = sum(bool(_limited(c)) for c in drawn)
    assert 0.2 * len(drawn) <= with_clause <= 0.8 * len(drawn), f"{with_clause} of {len(drawn)} cases"
