"""How many state partitions a streaming query's new checkpoint gets.

Spark gives every stateful operator of a query the same number of state partitions, fixed when the
query's checkpoint is made (`spark.sql.shuffle.partitions`, which a restart takes back from the
checkpoint, whatever the session says): each partition is a task, a state store loaded and committed
and, for a Python operator, a Python runner started and closed, in every micro-batch, whether or not
it holds a key. An operator that keeps all its state under one key fills one partition and leaves
the others to run empty: a Sequencer (one key per stream), a pattern without PARTITION BY, an
aggregate without GROUP BY, an OUTPUT limit of its own. So a query whose every stateful operator is
such gets one partition; any other gets CEP_SHUFFLE_PARTITIONS (one per core by default), across
which its keys spread. The count changes no result (the fuzzer draws one and two for every case).
"""

from __future__ import annotations

from deployer.spark.run.queries import Query
from operators import graph as g
from operators.output_node import OutputRate


def one_group(node: g.Node) -> bool:
    """Whether a stateful operator keeps its state under one key on Spark, or a few that one task
    holds as well as several: a pattern without PARTITION BY (deployer.spark.patterns.translate keys
    it by ""), an aggregate without GROUP BY (a TUPLE or BATCH window's one group, a TIME window's
    open windows, whose rows Spark aggregates partially before the shuffle), and an OUTPUT limit,
    whose own operator keeps every group's rows under one key (deployer.spark.output.translate) and
    which a window's operator holds otherwise (keyed as that window, which is in the query too). A
    join keys its pairs by its equalities."""
    if isinstance(node, g.Pattern):
        return node.partition is None
    if isinstance(node, g.Aggregate):
        return not node.keys
    return isinstance(node, OutputRate)


def state_partitions(graph: g.Graph, query: Query | None, keyed: int) -> int:
    """The state partitions of `query` (None: a query of no plan, whose operators are not known),
    `keyed` for one whose keys spread (the module docstring)."""
    if query is None:
        return keyed
    return 1 if all(one_group(graph.node(n)) for n in query.stateful) else keyed
