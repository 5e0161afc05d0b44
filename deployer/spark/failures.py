"""Where the failed rows of a Spark deployment are written: the queries that write failures only, and
the failures a sink's or a table's query writes along with its rows (deployer.spark.queries).

A failure point after a window, a join or a data store call whose rows a sink or a table writes as
they are (`queries.written_with`) is written by that query: it runs the frame before the split once
per micro-batch (`graph.Split.whole`), persists the batch and writes its failed rows as dead letters,
then its other rows. A query of its own would compute the window, or call the store, a second time.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from pyspark.sql import DataFrame

from deployer.spark.dead_letters import dead_letter_frame
from deployer.spark.graph import DeadLetter, SparkGraph, Split
from deployer.spark.queries import failed_query

Writer = Callable[[DataFrame, int], None]


def numbered(dead_letters: Sequence[DeadLetter]) -> list[tuple[DeadLetter, str]]:
    """Each dead letter with the name of its failure point's query, `failed:<node>[-k]`: a node may
    split off failed rows in more than one place (an Aggregate: its input events and its result
    rows), numbered in the order the translation met them, as `queries.plan_queries` numbers them."""
    seen: dict[str, int] = {}
    out = []
    for dl in dead_letters:
        if dl.stateless:
            out.append((dl, ""))
            continue
        k = seen[dl.node] = seen.get(dl.node, 0) + 1
        out.append((dl, failed_query(dl.node, k)))
    return out


def where(dl: DeadLetter) -> dict[str, Any]:
    """What a dead letter of `dl` says of where it failed."""
    return {"stage": dl.stage, "stream": dl.stream, "node": dl.node, "line": dl.line}


def split_of(sg: SparkGraph, rows: DataFrame) -> tuple[DeadLetter, Split, str]:
    """The failure point whose rows are `rows` (a port's frame), its split and its query's name."""
    for dl, name in numbered(sg.dead_letters):
        if dl.split is not None and dl.split.rows is rows:
            return dl, dl.split, name
    raise AssertionError(
        "the query plan has a sink or table write failures its translation did not split off"
    )


def along(
    dl: DeadLetter, split: Split, dead: Writer, write: Writer, shape: Callable[[DataFrame], DataFrame] | None
) -> Writer:
    """foreachBatch of a query that runs `split.whole` (of `dl`): each batch persisted, its failed rows written
    by `dead`, then its other rows, made the port's rows (and `shape`d: a table's), by `write`. Both
    are written again, whole, if the batch is replayed."""

    def both(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            dead(dead_letter_frame(split.failed(batch), where(dl)), batch_id)
            rows = split.kept(batch)
            write(rows if shape is None else shape(rows), batch_id)
        finally:
            batch.unpersist()

    return both


def failure_queries(
    sg: SparkGraph, written: Collection[str], rejected: Iterable[tuple[str, DataFrame]]
) -> tuple[dict[str, DataFrame], DataFrame | None]:
    """The failure points with a query of their own (query name -> its dead letters), leaving out
    those `written` by a sink's or a table's query; and the frame of the dead-letters query, if any:
    the `rejected` records of the sources (stream, its rejects) and the failures of stateless
    operators, in one DataFrame shape (`dead_letter_frame`)."""
    own: dict[str, DataFrame] = {}
    shared = [dead_letter_frame(bad, {"stage": "input", "stream": s}) for s, bad in rejected]
    for dl, name in numbered(sg.dead_letters):
        frame = dead_letter_frame(dl.df, where(dl))
        if dl.stateless:
            shared.append(frame)
        elif name not in written:
            own[name] = frame
    union = shared[0] if shared else None
    for frame in shared[1:]:
        union = union.unionByName(frame) if union is not None else frame
    return own, union
