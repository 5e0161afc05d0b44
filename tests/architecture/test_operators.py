"""Every operator of the graph has a meaning in the reference executor and a translation on Spark:
one entry per node type in each engine's table (as ibis checks its backends), none for a node type
the graph does not have. A new operator fails here until both engines have it."""

from __future__ import annotations

import pytest

from deployer.local.executor import OPERATORS as LOCAL
from deployer.spark.handlers import HANDLERS as SPARK
from operators.graph import OPERATORS


@pytest.mark.parametrize("engine", [LOCAL, SPARK], ids=["local", "spark"])
def test_every_operator_has_one_entry_per_engine(engine: dict[type, object]) -> None:
    missing = [op.__name__ for op in OPERATORS if op not in engine]
    assert missing == [], f"no translation for {missing}"
    unknown = [t.__name__ for t in engine if t not in OPERATORS]
    assert unknown == [], f"entries for node types the graph does not have: {unknown}"
