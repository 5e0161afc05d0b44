"""Cases the engines may tell apart by Spark's one watermark per query (docs/language.md,
"Engines"), which the fuzzer draws again rather than compares.

A TIME window, a pattern's deadlines, a join's eviction and an OUTPUT limit by time follow, in the
language, the watermark of their own input; on Spark, that of their query, the least of all the
streams with event time the query reads. A query reads more streams than such an operator when its
rows meet another stream's after it without event time (a Union of two windows' rows, one over s1,
the other over s2: found by the fuzzer, seed 2535): there the operator over the stream that ran
ahead fires only once the other catches up, and at the end of a bounded input those of its windows
between the two streams' last watermarks stay open on Spark, where the reference closes them.
"""

from __future__ import annotations

from collections.abc import Collection

from fuzz_case import Case

from cpl.compiler import compile_script
from operators import graph as g
from operators.watermarks import held_by_other_streams, written


def held_by_another_stream(graph: g.Graph, sinks: Collection[str]) -> g.Node | None:
    """The first operator that Spark's watermark fires in a query (a sink's or a table's) that
    reads a stream with event time which the operator does not read, if any
    (operators.watermarks.held_by_other_streams)."""
    held = held_by_other_streams(graph, written(graph, sinks))
    return graph.node(next(iter(held))) if held else None


def held_apart(case: Case) -> bool:
    """Whether `case` has such an operator (`held_by_another_stream`)."""
    return held_by_another_stream(compile_script(case.script).graph, case.sinks) is not None
