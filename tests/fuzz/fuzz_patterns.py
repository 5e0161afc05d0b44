"""Pattern and sequence statements for the differential fuzzer (docs/language.md, "Patterns").

A statement is `FROM PATTERN` (steps joined by `->`) or `FROM SEQUENCE` (by `,`) over one or two
streams with event time (a source, a Map's, a Union's, a join's, a store call's, another pattern's
with its match time): one to four elements, each a step with or without a condition, a counted step
(`<n>`, `<n:m>`, `<n:>`, `<:m>`, and in a sequence `+ * ?`), an absence (`NOT s[c] FOR d`, leading,
middle or trailing), an AND or OR of two steps, or `NOT s[c] AND step`; EVERY on one element or on a
group of them; WITHIN, PARTITION BY and a WHERE on the matches now and then. A condition reads the
tested event's fields and the values earlier steps bound (`e1.v`, `e2[last].v`), and often links to
an earlier step by equality (`k = e1.k`, what the runtime indexes) or by a comparison (`k > e1.k`,
what it keeps sorted); the SELECT reads the aliases
(an index or an aggregate of a counted one) and, now and then, the match time. Conditions, the WHERE
and SELECT items may draw expressions that fail on some events (fuzz_exprs.at): a condition's in
every state of a partial, since a later step's is evaluated only while a partial waits there.

Rows come in order per partition key (`k`, selected from a step that every match binds) or, with no
PARTITION BY, as one ordered stream. What depends on order reads a partitioned pattern's rows in time
order (cpl.plan_order), which needs their time: without it they count as merged
(fuzz_scripts.Builder.learn).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fuzz_exprs import BOOL, CATEGORIES, DBL, INT, Field
from fuzz_output import limit_pattern
from hypothesis import strategies as st

if TYPE_CHECKING:
    from fuzz_scripts import Builder, Stream

# the fuzz inputs' events are 0 to 60 s apart (fuzz_inputs.STEPS): deadlines that some partials meet
DURATIONS = ["250 MILLISECONDS", "1 SECOND", "2 SECONDS", "5 SECONDS", "30 SECONDS", "1 MINUTE", "1 HOUR"]
# A link to an earlier step: an equality (the runtime indexes it by value) or a comparison (it keeps
# the partials sorted by the value: deployer.patterns.partial.Ranked).
LINK_OPS = ["=", "=", "<", "<=", ">", ">="]
OPTIONAL = ("<0:2>", "<0:>", "<:2>", "<:1>", "*", "?")  # the counts that may take no event
PATTERN_COUNTS = ["<1>", "<2>", "<0:2>", "<1:3>", "<2:>", "<0:>", "<:2>", "<3>", "<:1>"]
SEQUENCE_COUNTS = [*PATTERN_COUNTS, "+", "*", "?", "+", "*"]


@dataclass
class Alias:
    name: str
    stream: Stream
    counted: bool
    sure: bool  # every match binds it (not in an OR, no count with a minimum of 0)


class PatternDraw:
    """One pattern statement being drawn: its inputs, aliases so far and the text of each element."""

    def __init__(self, b: Builder, inputs: list[Stream], kind: str) -> None:
        self.b = b
        self.inputs = inputs
        self.kind = kind
        self.aliases: list[Alias] = []
        self.elements: list[str] = []
        self.ends_in_absence = False
        self.usable = 0  # the aliases of the elements before the one being drawn
        # whether an element so far needs an event (or a deadline): a pattern whose every element is
        # a count with a minimum of 0 is a compile error, so the last element then needs one
        self.takes = False
        self.must_take = False

    def draw_stream(self) -> Stream:
        chosen: Stream = self.b.draw(st.sampled_from(self.inputs))
        return chosen

    def earlier(self) -> list[Field]:
        """What a condition may read of the steps before it."""
        out = []
        for a in self.aliases[: self.usable]:
            for f in a.stream.scope():
                if a.counted:
                    out += [Field(f"{a.name}[0].{f.ref}", f.cat), Field(f"{a.name}[last].{f.ref}", f.cat)]
                else:
                    out.append(Field(f"{a.name}.{f.ref}", f.cat))
        return out

    def condition(self, s: Stream, own: str | None = None, counted: bool = False) -> str:
        """`[...]` or nothing: an expression over the event's fields and earlier values, often with
        a link to an earlier step's field (indexed or sorted by the runtime)."""
        b = self.b
        aimed_here = b.forced("condition")
        if not aimed_here and b.draw(st.integers(0, 3 if b.force is None else 1)) == 0:
            return ""
        scope = s.scope() + self.earlier()
        if own is not None and counted and b.draw(st.booleans()):
            scope += [Field(f"{own}[last].{f.ref}", f.cat) for f in s.scope()]
        conjuncts = []
        links = [
            (n, a.name)
            for a in self.aliases[: self.usable]
            if not a.counted
            for n in s.names(INT)
            if n in a.stream.names(INT)
        ]
        if links and b.draw(st.booleans()):
            field, alias = b.draw(st.sampled_from(links))
            op = b.draw(st.sampled_from(LINK_OPS))
            if op == "=" or b.draw(st.booleans()):
                conjuncts.append(f"{field} {op} {alias}.{field}")
            else:
                conjuncts.append(f"{alias}.{field} {op} {field}")
        if not conjuncts or aimed_here or b.draw(st.booleans()):
            conjuncts.append(b.at(BOOL, scope, 2, "condition"))
        return f"[{' AND '.join(conjuncts)}]"

    def step(self, counted_ok: bool = True, sure: bool = True, counted: bool = False) -> str:
        s = self.draw_stream()
        name = f"e{len(self.aliases) + 1}"
        count = ""
        if counted or (counted_ok and self.b.draw(st.integers(0, 2)) == 0):
            counts = SEQUENCE_COUNTS if self.kind == "SEQUENCE" else PATTERN_COUNTS
            if self.must_take:
                counts = [c for c in counts if c not in OPTIONAL]
            count = self.b.draw(st.sampled_from(counts))
        several = count not in ("", "<1>")  # `<1>` is one event, as a plain step
        cond = self.condition(s, name, several)
        optional = count in OPTIONAL
        self.takes = self.takes or not optional
        self.aliases.append(Alias(name, s, several, sure and not optional))
        return f"{name}={s.name}{cond}{count}"

    def absence(self, wait: bool = True) -> str:
        self.takes = True
        s = self.draw_stream()
        text = f"NOT {s.name}{self.condition(s)}"
        return f"{text} FOR {self.b.draw(st.sampled_from(DURATIONS))}" if wait else text

    def element(self) -> str:
        self.usable = len(self.aliases)
        form = self.b.draw(st.integers(0, 9))
        previous_absent = self.ends_in_absence
        self.ends_in_absence = False
        if form <= 3 or (form == 5 and previous_absent):
            return self.step()
        if form == 4:
            return self.step(counted=True)
        if form == 5:
            self.ends_in_absence = True
            return self.absence()
        if form == 6:
            return f"({self.step(False)} AND {self.step(False)})"
        if form == 7:
            return f"({self.step(False, sure=False)} OR {self.step(False, sure=False)})"
        if form == 8:
            return f"({self.absence(wait=False)} AND {self.step(False)})"
        if previous_absent:
            return self.step()
        self.ends_in_absence = True  # a side that may hold until its deadline
        return f"({self.absence()} OR {self.step(False, sure=False)})"

    def body(self) -> str:
        b = self.b
        # aimed at a position (fuzz_aims): short, so that matches reach the WHERE and SELECT
        n = b.draw(st.integers(1, 4 if b.force is None else 2))
        texts = []
        for i in range(n):
            self.must_take = i == n - 1 and not self.takes
            texts.append(self.element())
        sep = " -> " if self.kind == "PATTERN" else ", "
        form = b.draw(st.integers(0, 4))
        if form == 0 or (n == 1 and form > 3):
            return sep.join(texts)
        if form <= 2 or n == 1:  # EVERY on one element
            at = 0 if form == 1 else b.draw(st.integers(0, n - 1))
            texts[at] = f"EVERY {texts[at]}"
            return sep.join(texts)
        lo = b.draw(st.integers(0, n - 2))
        hi = b.draw(st.integers(lo + 1, n - 1))
        group = f"EVERY ({sep.join(texts[lo : hi + 1])})"
        return sep.join([*texts[:lo], group, *texts[hi + 1 :]])


def _row_fields(p: PatternDraw) -> list[Field]:
    """What the SELECT and WHERE may read: each alias's fields (an index or an aggregate of a
    counted one)."""
    out = []
    for a in p.aliases:
        for f in a.stream.scope():
            if not a.counted:
                out.append(Field(f"{a.name}.{f.ref}", f.cat))
                continue
            out += [Field(f"{a.name}[0].{f.ref}", f.cat), Field(f"{a.name}[last].{f.ref}", f.cat)]
            out.append(Field(f"count({a.name}.{f.ref})", INT))
            if f.cat in (INT, DBL):
                out += [Field(f"max({a.name}.{f.ref})", f.cat), Field(f"sum({a.name}.{f.ref})", f.cat)]
    return out


def _select(p: PatternDraw, partitioned: bool, timed: bool) -> tuple[list[str], list[str] | None]:
    """The SELECT items and the order the rows come in (see the module docstring)."""
    b = p.b
    fields = _row_fields(p)
    items: list[str] = []
    order: list[str] | None = [] if not partitioned else None
    keyed = [a for a in p.aliases if a.sure and not a.counted and "k" in a.stream.names(INT)]
    if partitioned and keyed:
        items.append(f"{keyed[0].name}.k AS k")
        order = ["k"]
    plain = [f for f in fields if "(" not in f.ref]
    for f in plain:
        if b.draw(st.integers(0, 2)) == 0:
            items.append(f"{f.ref} AS {b.fresh('p')}")
    aggs = [f for f in fields if "(" in f.ref]
    for f in aggs[:2]:
        if b.draw(st.booleans()):
            items.append(f"{f.ref} AS {b.fresh('p')}")
    if timed or b.draw(st.integers(0, 2)) > 0:
        items.append(f"match_time() AS {b.fresh('t')}")
    over = [*fields, Field("match_time()", "timestamp")]
    for _ in range(b.draw(st.integers(1 if b.forced("SELECT") else 0, 2))):
        items.append(f"{b.at(b.draw(st.sampled_from(CATEGORIES)), over, 2, 'SELECT')} AS {b.fresh('c')}")
    if not items:
        items.append(f"match_time() AS {b.fresh('t')}")
    return items, order


def pattern(b: Builder) -> bool:
    timed = [s for s in b.streams.values() if s.event_time]
    if not timed:
        return False
    first = b.pick(lambda s: s.event_time is not None)
    inputs = [first]
    if not b.single_input and b.draw(st.integers(0, 2)) == 0:
        inputs.append(b.draw(st.sampled_from(timed)))
    kind = "SEQUENCE" if b.draw(st.integers(0, 2)) == 0 else "PATTERN"
    p = PatternDraw(b, inputs, kind)
    body = p.body()
    used = {a.stream.name for a in p.aliases} | {s.name for s in inputs if f"NOT {s.name}" in body}
    keyed = all("k" in b.streams[name].names(INT) for name in used)
    partitioned = keyed and b.draw(st.integers(0, 2)) > 0
    within = f" WITHIN {b.draw(st.sampled_from(DURATIONS))}" if b.draw(st.booleans()) else ""
    partition = " PARTITION BY k" if partitioned else ""
    # a stream made for another statement to read in event time (aiming) keeps the match time
    items, order = _select(p, partitioned, b.force == "-")
    where = ""
    if b.forced("WHERE") or (b.force is None and b.draw(st.integers(0, 3)) == 0):
        where = f" WHERE {b.at(BOOL, [*_row_fields(p), Field('match_time()', 'timestamp')], 1, 'WHERE')}"
    limited, order = limit_pattern(b, _row_fields(p), order)
    out = b.fresh("m")
    stmt = (
        f"INSERT INTO {out} SELECT {', '.join(items)} FROM {kind} {body}{within}{partition}{where}{limited}"
    )
    b.add(stmt, {out: order}, sorted(used), "pattern")
    return True
