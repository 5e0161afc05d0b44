"""A chain of integer steps is split from the rows that go on by one condition, not one per step
(deployer.spark.translate.failed_rows), with the same rows, dead letters and reasons as the
reference on both engines: an overflow in the first step or the last, a NULL column, and chains
that are not such (a column beside a chain, two chains) kept a condition per step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Outputs, assert_same, assert_same_dead_letters, compile_text, run_both

from deployer.spark.handlers import spark_graph
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.failed_rows import Errors, chain_columns
from deployer.spark.translate.graph import SEQ, named
from operators import graph as g

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA e WITH k integer, i integer, j integer, b bigint;
INSERT INTO affine SELECT k, i * 10 + 10 AS cost, 7 - i * 3 AS back FROM e;
INSERT INTO negated SELECT k, -(i * 2) - 5 AS n, -(b * 4) AS nb FROM e;
INSERT INTO deep SELECT k, ((i + 1) * 2 + 3) * 5 AS d, i * j AS ij FROM e;
INSERT INTO mixed SELECT k, i * 2 + j AS m, (i + j) * (j - i) AS two FROM e;
"""
SINKS = ["affine", "negated", "deep", "mixed"]
I_MIN, I_MAX, B_MAX = -(2**31), 2**31 - 1, 2**63 - 1
# Chains: how many error conditions each SELECT's expressions have, and how many split the rows.
CONDITIONS = {
    "affine": (4, 2),  # two chains of two steps: one condition each
    "negated": (5, 2),  # -(i * 2) - 5: three steps, one condition; -(b * 4): two steps, one
    "deep": (5, 2),  # four steps, one condition; i * j is one step
    "mixed": (5, 5),  # a column beside a chain, two chains: a condition per step
}


def rows() -> list[dict[str, Any]]:
    # each value overflows some step of some chain, or none, or is NULL
    ints = [
        0,
        1,
        -1,
        None,
        214748363,
        214748364,
        214748365,
        I_MAX,
        I_MIN,
        1073741823,
        -715827882,
        46341,
        65536,
    ]
    js = [3, None, I_MAX, -2, 46341, 0]
    bigs = [5, None, B_MAX // 4, B_MAX // 4 + 1, -(B_MAX // 4) - 1, 0]
    return [
        {"k": k, "i": ints[k % len(ints)], "j": js[k % len(js)], "b": bigs[k % len(bigs)]} for k in range(72)
    ]


def _maps() -> dict[str, g.Map]:
    """The script's Maps, by the stream each makes."""
    graph = compile_text(SCRIPT)
    return {s: n for s, p in graph.streams.items() if isinstance(n := graph.node(p.node), g.Map)}


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    tmp: Path = tmp_path_factory.mktemp("integer-chains")
    data = rows()
    return run_both(spark, tmp, SCRIPT, {"e": [data[:40], data[40:]]}, SINKS)


@pytest.mark.parametrize("sink", SINKS)
def test_same_rows(both: tuple[Outputs, Outputs], sink: str) -> None:
    assert_same(*both, sink, min_rows=10, ordered=True)


@pytest.mark.parametrize("sink", SINKS)
def test_rows_that_go_on_where_failures_are_dropped(
    spark: Any, both: tuple[Outputs, Outputs], sink: str
) -> None:
    """A query that drops the Map's failed rows (another writes them, or none is collected) splits
    them by `Errors.failed`, not by their messages as `cep run`'s spool above: the same rows."""
    ref, _ = both
    graph = compile_text(SCRIPT)
    events = spark.createDataFrame(
        [(r["k"], r["i"], r["j"], r["b"], f"{n:020d}") for n, r in enumerate(rows())],
        f"_0 int, _1 int, _2 int, _3 bigint, {SEQ} string",
    )
    sg = spark_graph(graph, {"e": events}, collect_dead_letters=False)
    port = sg.port(graph.streams[sink])
    got = sorted((r.asDict() for r in named(port, graph.stream_schema(sink)).collect()), key=lambda r: r["k"])
    assert got == sorted(ref.streams[sink], key=lambda r: r["k"])
    assert len(got) >= 10


def test_same_dead_letters(both: tuple[Outputs, Outputs]) -> None:
    ref, _ = both
    reasons = " | ".join(sorted({r["reason"] for r in ref.dead}))
    assert "integer overflow: 2147483650 is out of range for integer" in reasons, reasons
    assert "integer overflow: 9223372036854775808 is out of range for bigint" in reasons, reasons  # -(b*4)
    # i * 10 + 10 overflows in its last step for 214748364, in its first for 214748365
    affine = {r["event"][1] for r in ref.dead if r["line"] == 3}
    assert {214748364, 214748365} <= affine, affine
    assert 214748363 not in affine
    assert_same_dead_letters(*both)


@pytest.mark.parametrize("sink", SINKS)
def test_one_condition_per_chain(spark: Any, sink: str) -> None:
    node = _maps()[sink]
    c = ExprCompiler()
    for p in node.projections:
        c.compile(p.expr)
    assert isinstance(c.errors, Errors)
    assert (len(c.errors), len(c.errors.failed())) == CONDITIONS[sink]


def test_chains_and_not() -> None:
    exprs = {p.name: p.expr for m in _maps().values() for p in m.projections}
    assert [c.name for c in chain_columns(exprs["cost"]) or []] == ["i"]
    assert [c.name for c in chain_columns(exprs["d"]) or []] == ["i"]
    assert [c.name for c in chain_columns(exprs["ij"]) or []] == ["i", "j"]
    assert chain_columns(exprs["m"]) is None  # i * 2 fails where j is NULL too
    assert chain_columns(exprs["two"]) is None
