"""What the Spark engine does not run yet, refused before Spark starts, with the way out.

OUTPUT rate limiting (operators.output_node) runs on the reference executor only, for now: on Spark
it is to live in the stateful operator that holds the statement's groups, with event-time timers, as
the Pattern operator does (docs/language.md, "Output rate limiting"). Until then a script with an
OUTPUT clause is refused here, whichever way it reaches the engine (`cep run`, the service, a
SparkGraph built directly), rather than failing inside a query. No pyspark here: the check runs
before a JVM exists.
"""

from __future__ import annotations

from operators import graph as g


class UnsupportedOnSpark(ValueError):
    """A graph the Spark engine cannot run; the message names the statement and what to do."""


def check_supported(graph: g.Graph) -> None:
    for node in graph.nodes:
        if isinstance(node, g.OutputRate):
            raise UnsupportedOnSpark(
                f"line {node.line}: OUTPUT {node.describe()} runs on --engine local only for now; "
                "the Spark engine has no output rate limiting yet (docs/language.md, "
                '"Output rate limiting")'
            )
