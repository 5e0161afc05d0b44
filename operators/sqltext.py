"""Reading the SQL text of a `CREATE SQLQUERY`: its `?` parameters, its kind, its statement count.

CPL never splices values into SQL: the text is the user's, with `?` marking positional parameters,
and the stores bind values to them. Both the compiler (to validate) and the stores (to rewrite `?`
into the driver's placeholder) read the text with this one scanner, so they always agree on where
the parameters are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SqlText:
    text: str
    params: tuple[int, ...]  # offsets of each `?` placeholder, in order
    statements: int  # non-empty statements separated by `;`
    kind: str  # "select" | "insert" | "update" | "delete" | the first word, lower case, if other


def _scan(text: str) -> tuple[list[int], list[int], str]:
    """Offsets of `?` and `;` outside quotes and comments, and the text with those parts blanked."""
    params: list[int] = []
    semis: list[int] = []
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in ("'", '"'):
            j = i + 1
            while j < n:
                if text[j] == c:
                    if j + 1 < n and text[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                out[k] = " "
            i = j
            continue
        if c == "?":
            params.append(i)
        elif c == ";":
            semis.append(i)
        i += 1
    return params, semis, "".join(out)


_FIRST_WORD = re.compile(r"\s*\(?\s*([A-Za-z]+)")


def analyze(text: str) -> SqlText:
    params, _semis, blanked = _scan(text)
    pieces = [p for p in blanked.split(";") if p.strip()]
    m = _FIRST_WORD.match(blanked)
    kind = m.group(1).lower() if m else ""
    if kind == "with":  # a CTE: the statement's kind is that of its main verb
        verbs = re.findall(r"\b(select|insert|update|delete)\b", blanked, flags=re.IGNORECASE)
        kind = verbs[-1].lower() if verbs else "with"
    return SqlText(text, tuple(params), len(pieces), kind)


def to_driver_placeholders(text: str, style: str) -> str:
    """Rewrite `?` as the driver's placeholder: "pyformat" (`%s`, escaping `%`) or "named" (`:pN`)."""
    params, _, _ = _scan(text)
    out: list[str] = []
    last = 0
    for n, off in enumerate(params):
        chunk = text[last:off]
        out.append(chunk.replace("%", "%%") if style == "pyformat" else chunk)
        out.append("%s" if style == "pyformat" else f":p{n + 1}")
        last = off + 1
    tail = text[last:]
    out.append(tail.replace("%", "%%") if style == "pyformat" else tail)
    return "".join(out)
