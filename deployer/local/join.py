"""The Join operator at run time: a symmetric windowed join over event time.

Both inputs are merged into one event-time order (time, then left before right, then arrival;
`runtime.Merger`), so the result does not depend on how the two streams interleaved on arrival.
Each merged event x at time T is matched against the events kept for the other side, then kept for
its own side. With window sizes Sl and Sr (graph.Join), a pair (l, r) may match when
r.ts - Sl < l.ts < r.ts + Sr. Since later events have times >= T, a kept left event l can still
match only while l.ts + Sl > T and a kept right event r only while r.ts + Sr > T: older ones are
evicted before matching, and everything kept then lies in the time range. So every pair is
considered exactly once, when the later of its two events (in merged order) is processed.

Output event time, when the join projects the left time field, is l.ts, which can be up to Sl
behind the merged time (a later right event r pairs with l while l.ts > r.ts - Sl); outputs are
therefore re-sorted and released below (merge limit - max(Sl, Sr)), which is the output's
watermark: it keeps the output stream in event-time order, and a TIME window over it fires only
once no later pair can fall into it — at the end of the input too (the least final watermark of the
inputs, less the larger size). Less Sl would do for l.ts; the larger size is what Spark's watermark
propagation through a join computes (each side's state watermark, the least of the two), which does
not know which side's time the output carries: found by the fuzzer (seed 38106), a TIME window over
such a join fired more windows at the end on the reference.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from deployer.evaluation.evaluate import compile_expr, compile_predicate
from deployer.local.runtime import EVAL_ERRORS, Event, MergedOperator, Runtime
from operators import expr as ir
from operators import graph as g
from operators.values import to_micros

_US_PER_MS = 1000


class JoinOp(MergedOperator):
    node: g.Join

    def __init__(self, node: g.Join, rt: Runtime):
        super().__init__(node, rt)
        self.sizes = (node.left_window.size * _US_PER_MS, node.right_window.size * _US_PER_MS)
        # per side: (time, place in the merged order, event)
        self.kept: tuple[deque[tuple[int, int, Event]], deque[tuple[int, int, Event]]] = (deque(), deque())
        always = isinstance(node.predicate, ir.Lit) and node.predicate.value is True
        self.pred = None if always else compile_predicate(node.predicate, paired=True)
        self.project = [compile_expr(p.expr, paired=True) for p in node.projections]
        self.time_pos = node.schema.position(node.event_time) if node.event_time else None
        # (ts, the pair's rank, output) awaiting release
        self.pending: list[tuple[int, tuple[int, int, int], Event]] = []
        self.seq = 0

    def finish(self, final: int | None) -> None:
        while self.pending:
            ts, _, out = heapq.heappop(self.pending)
            self.emit(out, ts)
        self.emit_end(
            final - max(self.sizes) if isinstance(final, int) and self.time_pos is not None else final
        )

    def passed(self, limit: int | None) -> None:
        if self.time_pos is None or not isinstance(limit, int):
            return
        # Future outputs pair a future event (time >= limit) with a kept one: l.ts > limit - Sl;
        # the watermark is the more cautious limit - max(Sl, Sr), as Spark's (module docstring).
        out_wm = limit - max(self.sizes)
        while self.pending and self.pending[0][0] < out_wm:
            ts, _, out = heapq.heappop(self.pending)
            self.emit(out, ts)
        self.forward_watermark(out_wm)

    def merged(self, side: int, ts: int, event: Event) -> None:
        for s in (0, 1):
            kept, size = self.kept[s], self.sizes[s]
            while kept and kept[0][0] + size <= ts:
                kept.popleft()
        self.seq += 1  # this event's place in the merged order
        for other_ts, other_seq, other in self.kept[1 - side]:
            pair = (event, other) if side == 0 else (other, event)
            try:
                if self.pred is not None and not self.pred(pair):
                    continue
                out = tuple(p(pair) for p in self.project)
            except EVAL_ERRORS as err:
                self.fail(err, pair[0] + pair[1])
                continue
            # (left's place, right's time, right's place): Spark's order of a pair (the left's order
            # key, then the right's: deployer/spark/translate/join.py), found by the fuzzer (seed 38209)
            rank = (self.seq, other_ts, other_seq) if side == 0 else (other_seq, ts, self.seq)
            self._output(out, rank)
        self.kept[side].append((ts, self.seq, event))

    def _output(self, out: Event, rank: tuple[int, int, int]) -> None:
        if self.time_pos is None:
            self.emit(out, None)
            return
        value: Any = out[self.time_pos]
        heapq.heappush(self.pending, (to_micros(value), rank, out))
