"""The OutputRate node of the operator graph (`OUTPUT [ALL | FIRST | LAST | SNAPSHOT] EVERY ...`): how
often a statement's rows go out, Siddhi's output rate limiting read in event time (docs/language.md,
"Output rate limiting"). A node of its own module, beside the paper's in operators.graph."""

from __future__ import annotations

from dataclasses import dataclass

from operators.datatypes import Schema
from operators.declarations import format_ms
from operators.node import Node

ALL = "all"
FIRST = "first"
LAST = "last"
SNAPSHOT = "snapshot"
KINDS = (ALL, FIRST, LAST, SNAPSHOT)


@dataclass(frozen=True, kw_only=True)
class OutputRate(Node):
    """The last node of a statement with an OUTPUT clause: it reads the statement's rows and lets
    through the ones its kind says, when its kind says.

    Its input row is the statement's output (`width` columns) followed by the values of the
    statement's GROUP BY keys, then, when the statement has event time, the row's time (a hidden
    `$time`, unless `time_index` points at a selected field): the statement that makes the row
    computes them, so that the limiter needs no expressions of its own. Only the first `width`
    columns go on.

    Time is the time of each row, which its producer knows (the event's, the match's, for a window's
    row the last instant the window covers), and ticks are the input's watermark passing `k ·
    every_ms` on the epoch. Exactly one of `every_events` and `every_ms` is set; SNAPSHOT has
    `every_ms`. `snapshot_window`: for SNAPSHOT over a TIME window, its (SIZE, ADVANCE) in ms, which
    tell which rows are still current at a tick (those of the latest window that ended by then);
    None: a group's latest row stays current (TUPLE and BATCH windows, which nothing expires).
    """

    input_schema: Schema
    kind: str
    every_events: int | None = None
    every_ms: int | None = None
    width: int
    group_by: tuple[str, ...] = ()  # the GROUP BY keys as written, for people reading plans
    snapshot_window: tuple[int, int] | None = None
    # The position in `input_schema` of the row's time, a timestamp: a field the statement selects,
    # or a hidden `$time` column after the keys (cpl.plan_output.time_column). None: an aggregate's
    # rows, whose time is the window's (the engine knows it), or a statement without event time.
    time_index: int | None = None
    # Rows may come out of time order (a pattern with PARTITION BY, whose partitions Spark runs
    # apart): a limiter that decides as a row comes (EVENTS, FIRST) takes rows only once the
    # watermark has passed them, in time order (deployer.output.limiter.InTimeOrder).
    in_time_order: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"OutputRate kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if (self.every_events is None) == (self.every_ms is None):
            raise ValueError("OutputRate needs exactly one of every_events and every_ms")
        if (self.every_events or 1) < 1 or (self.every_ms is not None and self.every_ms < 1):
            raise ValueError("OutputRate needs a positive count or duration")
        if self.kind == SNAPSHOT and self.every_ms is None:
            raise ValueError("OUTPUT SNAPSHOT ticks on time, not on a count of rows")
        hidden = len(self.input_schema) - self.width - len(self.group_by)
        if hidden not in (0, 1) or (hidden == 1 and self.time_index != len(self.input_schema) - 1):
            raise ValueError(
                "OutputRate's input row is its output, one column per group key, then its time if hidden"
            )

    @property
    def schema(self) -> Schema:
        return Schema(self.input_schema.fields[: self.width])

    @property
    def keys(self) -> range:
        """The positions of the group key values in the input row."""
        return range(self.width, self.width + len(self.group_by))

    @property
    def holds(self) -> bool:
        """Whether rows can leave after later ones have arrived (ALL and LAST, SNAPSHOT, a limiter
        that waits for the watermark): such a limiter's output has no event time (docs/language.md,
        "Output rate limiting")."""
        return self.kind != FIRST or self.in_time_order

    @staticmethod
    def needs_time_order(kind: str, every_events: int | None) -> bool:
        """Whether a limiter of this kind decides as a row comes, so that rows out of time order
        would change what it lets out: ALL and LAST EVERY duration choose by time when they tick."""
        return kind == FIRST or every_events is not None

    @property
    def reorders(self) -> bool:
        """Whether the node only puts a pattern's partitions' rows in time order for a reader that
        depends on it (cpl.plan_order): every row goes on, once the watermark has passed it."""
        return self.kind == ALL and self.every_events == 1 and self.in_time_order

    def describe(self) -> str:
        """The clause as written: `LAST EVERY 5 EVENTS`, `SNAPSHOT EVERY 10 SECONDS`; `IN TIME ORDER`
        for a node the planner put before a reader of a pattern's partitions (`reorders`)."""
        if self.reorders:
            return "IN TIME ORDER"
        every = (
            f"{self.every_events} EVENTS" if self.every_events is not None else format_ms(self.every_ms or 0)
        )
        return f"{self.kind.upper()} EVERY {every}"

    def params(self) -> dict[str, object]:
        p: dict[str, object] = {"output": self.describe()}
        if self.group_by:
            p["per_group"] = list(self.group_by)
        if self.in_time_order:
            p["in_time_order"] = True
        return p
