"""The OutputRate operator in the reference executor: each row's group key read from its trailing
columns (operators.output_node), the row and its time handed to the node's limiter
(deployer.output), and the input's watermark as the limiter's ticks.

A row's time is the one its producer passes on (runtime.Operator.emit), whether or not the row has
an event-time field. Only FIRST's output has event time (operators.output_node `holds`): it lets
rows out as they come, so its watermark is its input's.
"""

from __future__ import annotations

from deployer.local.runtime import Event, Operator, Runtime
from deployer.output.factory import limiter_for
from deployer.output.limiter import Out
from operators.output_node import OutputRate


class OutputRateOp(Operator):
    node: OutputRate

    def __init__(self, node: OutputRate, rt: Runtime):
        super().__init__(node, rt)
        self.limiter = limiter_for(node)
        self.width = node.width
        self.keys = slice(node.width, node.width + len(node.group_by))

    def event(self, i: int, event: Event, ts: int | None) -> None:
        key = event[self.keys]
        self._send(self.limiter.row(key, event[: self.width], ts))

    def watermark(self, i: int, wm: int) -> None:
        self._send(self.limiter.tick(wm))
        if self.timed:
            self.emit_watermark(wm)

    def end(self, i: int, final: int | None) -> None:
        self.ended[i] = True
        self._send(self.limiter.end(final))
        self.emit_end(final)

    def _send(self, out: Out) -> None:
        for row, t in out:
            self.emit(row, t if self.timed else None)
