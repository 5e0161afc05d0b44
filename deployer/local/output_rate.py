"""The OutputRate operator in the reference executor: each row's group key read from its trailing
columns (operators.output_node), the row and its time handed to the node's limiter
(deployer.output), and the input's watermark as the limiter's ticks.

A row's time is the one its producer passes on (runtime.Operator.emit), whether or not the row has
an event-time field. When the output has one, its watermark is held back to the earliest row the
limiter still holds, so that a row it lets out later is not behind it.
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
        self.out_wm: int | None = None

    def event(self, i: int, event: Event, ts: int | None) -> None:
        key = event[self.width :]
        self._send(self.limiter.row(key, event[: self.width], ts))

    def watermark(self, i: int, wm: int) -> None:
        self._send(self.limiter.tick(wm))
        held = self.limiter.held()
        out = wm if held is None else min(wm, held)
        if self.timed and (self.out_wm is None or out > self.out_wm):
            self.out_wm = out
            self.emit_watermark(out)

    def end(self, i: int, final: int | None) -> None:
        self.ended[i] = True
        self._send(self.limiter.end(final))
        self.emit_end(final)

    def _send(self, out: Out) -> None:
        for row, t in out:
            self.emit(row, t if self.timed else None)
