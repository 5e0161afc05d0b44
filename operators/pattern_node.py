"""The Pattern node of the operator graph (FROM PATTERN / FROM SEQUENCE): a node of its own module,
beside the paper's in operators.graph, with the automaton it runs in operators.patterns."""

from __future__ import annotations

from dataclasses import dataclass

from operators.datatypes import T_TIMESTAMP, Field, Schema
from operators.expr import Expr
from operators.node import NamedExpr, Node, _schema_of, _show
from operators.patterns import Automaton, Ref

# The match time's name in a Pattern's row: not a valid CPL name, so it cannot clash.
MATCH_TIME = "$match_time"


@dataclass(frozen=True, kw_only=True)
class Pattern(Node):
    """A pattern or a sequence over one or more streams (`inputs`, one per stream, in the order they
    first appear in it), matched in their merged event-time order, per partition key.

    `automaton` is what is matched (operators.patterns). A match makes one row of `row_schema`: the
    values of `row` (the refs its SELECT and WHERE read: `e1.price`, `e2[last].ts`, `count(e2.x)`),
    then the match time (`MATCH_TIME`: the time of the event that completed it, or the deadline of
    the absence that did). `where` and `projections` read that row. `partition`: per input, the
    position of its partition key field; None: one automaton for the whole statement."""

    streams: tuple[str, ...]
    input_schemas: tuple[Schema, ...]
    input_times: tuple[str, ...]
    automaton: Automaton
    partition: tuple[int, ...] | None
    row: tuple[Ref, ...]
    where: Expr | None
    projections: tuple[NamedExpr, ...]
    # An input's rows come out of time order on Spark (a join's, another pattern's with PARTITION
    # BY: operators.analysis.out_of_time_order): the events are taken once the watermark has passed
    # them, in time order, as the reference executor's merge takes them, and at the end of a bounded
    # input those the final watermark has not passed are not taken (docs/language.md, "Rows out of
    # time order").
    in_time_order: bool = False

    @property
    def schema(self) -> Schema:
        return _schema_of(self.projections)

    @property
    def row_schema(self) -> Schema:
        """The match row that `where` and `projections` read."""
        fields = tuple(Field(self.ref_name(r), r.type) for r in self.row)
        return Schema((*fields, Field(MATCH_TIME, T_TIMESTAMP, False)))

    def ref_name(self, ref: Ref) -> str:
        return ref.to_cpl(self.automaton.slots[ref.slot].alias)

    def params(self) -> dict[str, object]:
        p: dict[str, object] = {
            "kind": self.automaton.kind.upper(),
            "streams": list(self.streams),
            "states": self.automaton.describe(self.streams),
        }
        if self.partition is not None:
            p["partition_by"] = [
                f"{s}.{schema.fields[i].name}"
                for s, schema, i in zip(self.streams, self.input_schemas, self.partition, strict=True)
            ]
        if self.where is not None:
            p["where"] = self._named(self.where.to_cpl())
        p["project"] = [self._named(x) for x in _show(self.projections)]
        if self.in_time_order:
            p["in_time_order"] = True
        return p

    def _named(self, text: str) -> str:
        """Show the match time as the function that reads it."""
        return text.replace(MATCH_TIME, "match_time()")
