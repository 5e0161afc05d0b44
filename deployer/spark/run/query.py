"""One streaming query of a deployment's plan (deployer.spark.run.queries), and how `cep explain
--queries` describes it (no pyspark here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from deployer.spark.output.placement import in_window, in_window_aggregation, in_window_processor
from deployer.spark.run.pattern_groups import PREFIX
from deployer.spark.windows.state_layout import bucketed
from operators import graph as g
from operators.output_node import OutputRate


@dataclass(frozen=True)
class Query:
    """One streaming query: its name, what it writes, the source streams it reads, and the stateful
    operators and data store calls it runs (node ids, in plan order)."""

    name: str
    writes: tuple[str, ...]
    reads: tuple[str, ...]
    stateful: tuple[str, ...] = ()
    store_calls: tuple[str, ...] = ()
    # the nodes whose rows it writes (what it computes is all their ancestors), and the failure
    # points whose dead letters its tasks write (`failed_query` without its prefix: `n6`, `n6-2`)
    ends: tuple[str, ...] = field(default=(), compare=False)
    spooled: tuple[str, ...] = ()
    # those of `spooled` whose rows it splits on the driver instead (deployer.spark.run.driver_split)
    on_driver: tuple[str, ...] = ()
    # the dead-letters query's: the failure points it writes (`input-<stream>`, `stateless-<node>`)
    owns: tuple[str, ...] = field(default=(), compare=False)
    # the nodes whose failures it writes along their rows, split from them on the driver
    # (deployer.spark.run.failures `along`; "failures of <node>" among `writes`)
    along: tuple[str, ...] = field(default=(), compare=False)

    def describe(self, graph: g.Graph) -> str:
        parts = [f"writes {', '.join(self.writes)}", f"reads {', '.join(self.reads) or 'nothing'}"]
        if self.stateful and self.name.startswith(PREFIX):  # its patterns run in one operator
            parts.append(f"state Patterns {', '.join(self.stateful)} in one operator")
        elif self.stateful:
            parts.append("state " + ", ".join(_stateful_label(graph, graph.node(n)) for n in self.stateful))
        if self.store_calls:
            parts.append("stores " + ", ".join(f"{graph.node(n).op} {n}" for n in self.store_calls))
        return f"{self.name}: " + "; ".join(parts)


def spark_name(deployment: str, query: str) -> str:
    """The name Spark knows a query of a deployment by (its progress, its UI): `deployment:query`."""
    return f"{deployment}:{query}"


def _stateful_label(graph: g.Graph, node: g.Node) -> str:
    if isinstance(node, g.Aggregate):
        layout = " per bucket" if bucketed(node) else ""
        return f"Aggregate {node.id} ({node.window.kind.upper()}{layout})"
    if isinstance(node, OutputRate) and in_window(graph, node):
        return f"OutputRate {node.id} (Spark's window aggregation)"
    if isinstance(node, OutputRate) and (
        in_window_processor(graph, node) or in_window_aggregation(graph, node)
    ):
        return f"OutputRate {node.id} (in Aggregate {node.inputs[0].node}'s state)"
    return f"{node.op} {node.id}"
