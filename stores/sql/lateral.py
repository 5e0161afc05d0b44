"""The batched ReadSQL rewrite for Postgres (docs/architecture.md, decision 4).

A batch of N events runs the user's SELECT once, as

    SELECT _cep_p._cep_ord, _cep_q.*
    FROM unnest(%s::integer[], %s::text[]) WITH ORDINALITY AS _cep_p(_cep_a1, _cep_a2, _cep_ord)
    CROSS JOIN LATERAL (<user query, each ? replaced by _cep_p._cep_aN>) AS _cep_q
    ORDER BY _cep_p._cep_ord

The values are bound as arrays, one per parameter; the only text we insert into the user's SQL is
our own column references, at the offsets the shared `?` scanner (operators/sqltext.py) found, so
the compiler and the stores agree on what is a parameter. The `_cep_` prefix keeps our names from
colliding with the user's aliases (the paper itself names a ReadSQL result `p`).

`ORDER BY _cep_ord` puts the events back in order. Within one event, a user's ORDER BY must
survive too. Today's planner keeps it (a subquery with ORDER BY is not flattened, so the join is a
nested loop over the unnest, whose ordinality order it knows, and it adds no sort), but that is
planner behaviour, not a guarantee: a full sort on `_cep_ord` alone, which is not stable, would
shuffle an event's rows. So when the user's query has an ORDER BY, each event's rows are also
numbered inside the subquery (`row_number() OVER ()` over the ordered rows) and that number is the
second sort key; it costs an incremental sort over input that is already in order. Without an ORDER
BY the order of an event's rows is unspecified anyway, and the planner keeps its freedom (it may
flatten the subquery into a hash join).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from operators.sqltext import _scan

_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
_DOLLAR_PARAM = re.compile(r"\$\d")


@dataclass(frozen=True)
class SelectText:
    text: str  # the user's text, statement separators blanked out
    params: tuple[int, ...]  # offsets of the `?` placeholders
    ordered: bool  # the query has an ORDER BY somewhere

    def substitute(self, replacements: Sequence[str], escape_percent: bool) -> str:
        """The text with the i-th `?` replaced by replacements[i] (and `%` doubled for psycopg)."""
        out: list[str] = []
        last = 0
        for off, rep in zip(self.params, replacements, strict=True):
            chunk = self.text[last:off]
            out.append(chunk.replace("%", "%%") if escape_percent else chunk)
            out.append(rep)
            last = off + 1
        tail = self.text[last:]
        out.append(tail.replace("%", "%%") if escape_percent else tail)
        return "".join(out)


def select_text(text: str) -> SelectText:
    """Check that `text` is one statement without `$n` placeholders, and locate its `?`s."""
    params, semis, blanked = _scan(text)
    if len([p for p in blanked.split(";") if p.strip()]) != 1:
        raise ValueError("the SQL text must be exactly one statement")
    if _DOLLAR_PARAM.search(blanked):
        raise ValueError("use ? for parameters, not $1-style placeholders")
    chars = list(text)
    for off in semis:  # trailing `;` would end the subquery early; same length keeps offsets valid
        chars[off] = " "
    return SelectText("".join(chars), tuple(params), bool(_ORDER_BY.search(blanked)))


def lateral_query(st: SelectText, types: Sequence[str], outer: bool = False) -> str:
    """The batched query; binds one array per parameter, or the batch size when there are none.

    `outer`: an event whose query returns no row still gets one, of NULLs (LEFT JOIN LATERAL).

    `types` are Postgres type names chosen by us or returned by the server's `format_type`, never
    text from events.
    """
    n = len(st.params)
    if len(types) != n:
        raise ValueError(f"{n} parameters but {len(types)} types")
    if n == 0:
        source = "generate_series(1, %s) AS _cep_p(_cep_ord)"
    else:
        arrays = ", ".join(f"%s::{t}[]" for t in types)
        cols = ", ".join(f"_cep_a{i}" for i in range(1, n + 1))
        source = f"unnest({arrays}) WITH ORDINALITY AS _cep_p({cols}, _cep_ord)"
    # Newlines around the user's text: a trailing `-- comment` must not swallow our closing paren.
    inner = st.substitute([f"_cep_p._cep_a{i}" for i in range(1, n + 1)], escape_percent=True)
    order = "_cep_p._cep_ord"
    if st.ordered:
        inner = f"SELECT _cep_u.*, row_number() OVER () AS _cep_rn FROM (\n{inner}\n) AS _cep_u"
        order += ", _cep_q._cep_rn"
    join, on = ("LEFT JOIN", " ON true") if outer else ("CROSS JOIN", "")
    return f"SELECT _cep_p._cep_ord, _cep_q.* FROM {source} {join} LATERAL (\n{inner}\n) AS _cep_q{on} ORDER BY {order}"


def describe_statements(st: SelectText, declared: Sequence[str]) -> tuple[str, str, str]:
    """PREPARE / read the parameter types / DEALLOCATE: how the server types each `?` of the query.

    `declared` gives each parameter's type, or "unknown" to let the server infer it from the query.
    These statements are sent without bind parameters, so `%` needs no escaping.
    """
    body = st.substitute([f"${i}" for i in range(1, len(st.params) + 1)], escape_percent=False)
    prepare = f"PREPARE _cep_probe ({', '.join(declared)}) AS\n{body}\n"
    types = (
        "SELECT array(SELECT format_type(u.o, NULL) FROM unnest(parameter_types::oid[])"
        " WITH ORDINALITY AS u(o, i) ORDER BY u.i) FROM pg_prepared_statements WHERE name = '_cep_probe'"
    )
    return prepare, types, "DEALLOCATE _cep_probe"
