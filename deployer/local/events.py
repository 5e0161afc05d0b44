"""What a run reports besides its results: dead letters and counters.

Both the reference executor and the local deployer (`deployer.local.driver`) produce these, so the CLI can
print one summary whichever engine ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeadLetter:
    """An event (or raw input record) that could not be processed, and why.

    `stage` says where it failed: "input" (the record could not be read or converted), "late"
    (behind its stream's watermark on arrival), or the operator name ("Map", "Filter", ...).
    """

    stage: str
    reason: str
    stream: str | None = None  # the source stream, for input and late records
    node: str | None = None  # the operator's node id
    line: int | None = None  # the script line of the operator's statement
    event: tuple[Any, ...] | None = None  # the typed event, when there is one
    record: str | None = None  # the original text, for input records
    source: str | None = None  # where the record came from: "file.jsonl:12", "<stdin>:3"

    def describe(self) -> str:
        where = self.stage
        if self.node:
            where += f" {self.node}"
        if self.line:
            where += f" (line {self.line})"
        if self.source:
            where += f" at {self.source}"
        return f"{where}: {self.reason}"


def _bump(counter: dict[str, int], key: str, n: int = 1) -> None:
    counter[key] = counter.get(key, 0) + n


@dataclass
class RunStats:
    """Counters of a run; every dict is keyed by stream name (node id for `filtered`, table for `applied`)."""

    events_in: dict[str, int] = field(default_factory=dict)  # accepted by a source (late ones too)
    events_out: dict[str, int] = field(default_factory=dict)  # emitted on each named stream
    filtered: dict[str, int] = field(default_factory=dict)  # dropped by a Filter/MultiFilter node
    late: dict[str, int] = field(default_factory=dict)  # behind the watermark, per source stream
    dead_lettered: dict[str, int] = field(default_factory=dict)  # per stage ("input", "Map", ...)
    applied: dict[str, int] = field(default_factory=dict)  # rows a store accepted, per table

    def count_in(self, stream: str) -> None:
        _bump(self.events_in, stream)

    def count_out(self, stream: str) -> None:
        _bump(self.events_out, stream)

    def count_filtered(self, node: str) -> None:
        _bump(self.filtered, node)

    def count_late(self, stream: str) -> None:
        _bump(self.late, stream)

    def count_dead(self, stage: str) -> None:
        _bump(self.dead_lettered, stage)

    def count_applied(self, table: str) -> None:
        _bump(self.applied, table)

    @property
    def total_in(self) -> int:
        return sum(self.events_in.values())

    @property
    def total_out(self) -> int:
        return sum(self.events_out.values())

    @property
    def total_filtered(self) -> int:
        return sum(self.filtered.values())

    @property
    def total_late(self) -> int:
        return sum(self.late.values())

    @property
    def total_dead_lettered(self) -> int:
        return sum(self.dead_lettered.values())

    @property
    def total_applied(self) -> int:
        return sum(self.applied.values())

    def summary(self) -> dict[str, Any]:
        """Plain data for printing or JSON: totals plus the per-stream breakdowns."""
        return {
            "in": self.total_in,
            "out": self.total_out,
            "filtered": self.total_filtered,
            "late": self.total_late,
            "dead_lettered": self.total_dead_lettered,
            "applied": self.total_applied,
            "events_in": dict(self.events_in),
            "events_out": dict(self.events_out),
            "late_by_stream": dict(self.late),
            "dead_lettered_by_stage": dict(self.dead_lettered),
        }
