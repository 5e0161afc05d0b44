"""The limiter of an OutputRate node (deployer.output.limiter, deployer.output.snapshot)."""

from __future__ import annotations

from deployer.output.limiter import (
    AllEvents,
    AllEvery,
    FirstEvents,
    FirstEvery,
    InTimeOrder,
    LastEvents,
    LastEvery,
    Limiter,
)
from deployer.output.snapshot import Snapshot
from operators.output_node import ALL, FIRST, LAST, SNAPSHOT, OutputRate
from operators.values import US_PER_MS


def limiter_for(node: OutputRate) -> Limiter:
    return adopted(node, _limiter(node))


def adopted(node: OutputRate, limiter: Limiter) -> Limiter:
    """`limiter` as `node` wants it: fed in time order when the node's rows may come out of it
    (`in_time_order`); a limiter kept by a checkpoint from before such rows waited for the
    watermark is wrapped from now on."""
    if node.in_time_order and not isinstance(limiter, InTimeOrder):
        return InTimeOrder(limiter)
    return limiter


def _limiter(node: OutputRate) -> Limiter:
    if node.every_events is not None:
        n = node.every_events
        return {ALL: AllEvents, FIRST: FirstEvents, LAST: LastEvents}[node.kind](n)
    assert node.every_ms is not None
    every = node.every_ms * US_PER_MS
    if node.kind == SNAPSHOT:
        w = node.snapshot_window
        return Snapshot(every, (w[0] * US_PER_MS, w[1] * US_PER_MS) if w is not None else None)
    return {ALL: AllEvery, FIRST: FirstEvery, LAST: LastEvery}[node.kind](every)
