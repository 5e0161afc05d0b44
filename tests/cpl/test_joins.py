"""How a join names its two sides: a stream joined with itself through two aliases compiles (each
alias names one side, the stream's own name neither), two sides with one name do not."""

from __future__ import annotations

import pytest

from cpl.compiler import compile_script
from cpl.errors import CompileError

SCHEMA = "CREATE STREAMSCHEMA s WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
WINDOW = "WINDOW TIME SIZE 10 SECONDS"


def test_a_self_join_through_two_aliases_compiles() -> None:
    graph = compile_script(
        SCHEMA + f"INSERT INTO pairs SELECT a.v AS av, b.v AS bv FROM s AS a {WINDOW}, s AS b {WINDOW} "
        "WHERE a.k = b.k AND a.v < b.v;"
    ).graph
    join = next(n for n in graph.nodes if n.op == "Join")
    assert [f.name for f in join.schema] == ["av", "bv"]


@pytest.mark.parametrize(
    "sides",
    [f"s {WINDOW}, s {WINDOW}", f"s AS a {WINDOW}, s AS a {WINDOW}", f"s AS a {WINDOW}, a {WINDOW}"],
)
def test_two_sides_with_one_name_are_refused(sides: str) -> None:
    with pytest.raises(CompileError, match="both sides of the join have the same name"):
        compile_script(
            SCHEMA
            + f"CREATE STREAMSCHEMA a WITH k integer, ts timestamp TIMESTAMP BY ts;\nINSERT INTO pairs SELECT * FROM {sides};"
        )


def test_the_stream_name_of_an_aliased_self_join_names_no_side() -> None:
    with pytest.raises(CompileError, match=r"s\.v"):
        compile_script(SCHEMA + f"INSERT INTO pairs SELECT s.v AS v FROM s AS a {WINDOW}, s AS b {WINDOW};")
