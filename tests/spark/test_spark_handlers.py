"""Every operator of the graph has a Spark translation (one handler per node type, as in ibis)."""

from __future__ import annotations

from deployer.spark.handlers import HANDLERS
from operators.graph import OPERATORS


def test_every_operator_has_a_spark_handler() -> None:
    missing = [op.__name__ for op in OPERATORS if op not in HANDLERS]
    assert missing == []


def test_no_handler_for_an_unknown_node_type() -> None:
    assert set(HANDLERS) <= set(OPERATORS)
