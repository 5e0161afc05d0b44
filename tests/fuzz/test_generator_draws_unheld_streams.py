"""The fuzzer's generator draws streams with a WATERMARK delay that Spark lets reach their TIME
windows unheld (deployer.spark.run.held), and ones it holds back, and so for sources that meet in a
merge, when aimed at those lines of the coverage table (fuzz_coverage.HOLDING_ROWS, MERGING_ROWS),
as a soak aims at a line it has not met. Generation only, no engine run: a generator that stops
drawing them fails here, not silently in a soak."""

from __future__ import annotations

from fuzz_coverage import HOLDING, HOLDING_ROWS, MERGING, MERGING_ROWS, Coverage
from fuzz_draws import drawn_cases

from cpl.compiler import compile_script
from deployer.spark.run import held
from deployer.spark.run.queries import sequenced_merges


def test_aimed_cases_draw_unheld_and_held_streams() -> None:
    cov = Coverage()
    unheld = 0
    drawn = drawn_cases(30, (HOLDING_ROWS[1],), first_seed=55000) + drawn_cases(
        15, (HOLDING_ROWS[0],), first_seed=56000
    )
    for c in drawn:
        cov.add(c.script, [], silent=False, sinks=c.sinks)
        graph = compile_script(c.script).graph
        files = {s: "file:in" for s in c.inputs}
        merged = {s.lower() for merge in sequenced_merges(graph, files) for s in merge}
        unheld += bool(set(held.unheld(graph, files, c.sinks)) - merged)
    assert cov.had[(HOLDING, "unheld", "-")] == unheld >= 5, (unheld, cov.had)
    assert cov.had[(HOLDING, "held", "-")] >= 5, cov.had
    assert not set(HOLDING_ROWS) & set(cov.gaps())


def test_aimed_cases_draw_unheld_and_held_merges() -> None:
    cov = Coverage()
    drawn = drawn_cases(45, (MERGING_ROWS[1],), first_seed=57000) + drawn_cases(
        30, (MERGING_ROWS[0],), first_seed=58000
    )
    for c in drawn:
        cov.add(c.script, [], silent=False, sinks=c.sinks)
    assert cov.had[(MERGING, "unheld", "-")] >= 5, cov.had
    assert cov.had[(MERGING, "held", "-")] >= 5, cov.had
    assert not set(MERGING_ROWS) & set(cov.gaps())
