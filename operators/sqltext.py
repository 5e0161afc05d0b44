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
    statements: int  # non-empty statements separated by `;`, as the strictest reading counts them
    kind: str  # "select" | "insert" | "update" | "delete" | the first word, lower case, if other


def _quote_end(text: str, i: int, backslash: bool) -> int:
    """The offset of the quote that closes the one at `i` (len(text) if none): a doubled quote is
    one quote character, and with `backslash` a backslash escapes the character after it."""
    c, j, n = text[i], i + 1, len(text)
    while j < n:
        if backslash and text[j] == "\\":
            j += 2
            continue
        if text[j] == c:
            if j + 1 < n and text[j + 1] == c:
                j += 2
                continue
            return j
        j += 1
    return n


# PostgreSQL's dollar quote: $$ or $tag$, where a tag is an identifier without `$`.
_DOLLAR = re.compile(r"\$(?:[A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")


def _ident_before(text: str, i: int) -> bool:
    """Is the character before `i` part of an identifier (so that `$` or `E` at `i` continues it)?"""
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_$")


def _scan(text: str, *, postgres: bool = False, backslash: bool = False) -> tuple[list[int], list[int], str]:
    """Offsets of `?` and `;` outside quotes and comments, and the text with those parts blanked.

    The default reading is standard SQL's (and SQLite's). `postgres` also reads PostgreSQL's
    dollar-quoted strings ($$...$$, $tag$...$tag$) and E'...' strings (backslash escapes), and
    `backslash` reads backslash escapes in every string (PostgreSQL with standard_conforming_strings
    off): a `'` inside such a string does not open a quote there, so a `;` after it may be real.
    """
    params: list[int] = []
    semis: list[int] = []
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        start = i + 1 if postgres and c in "eE" and text.startswith("'", i + 1) else i
        if text[start] in ("'", '"') and (start == i or not _ident_before(text, i)):
            escapes = text[start] == "'" and (backslash or start > i)
            j = _quote_end(text, start, escapes)
            for k in range(start + 1, min(j, n)):
                out[k] = " "
            i = j + 1
            continue
        dollar = _DOLLAR.match(text, i) if postgres and c == "$" and not _ident_before(text, i) else None
        if dollar is not None:
            j = text.find(dollar.group(0), dollar.end())
            j = n if j < 0 else j
            for k in range(dollar.end(), j):
                out[k] = " "
            i = j + len(dollar.group(0))
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


# A statement count must not be lower than the store's: a `;` it hides in a string the store does
# not see would let a second statement through. So the text is read as SQLite and PostgreSQL (either
# setting of standard_conforming_strings) read it, and the most statements any reading finds count.
_READINGS: tuple[dict[str, bool], ...] = ({}, {"postgres": True}, {"postgres": True, "backslash": True})


def _statements(text: str) -> int:
    return max(len([p for p in _scan(text, **r)[2].split(";") if p.strip()]) for r in _READINGS)


def analyze(text: str) -> SqlText:
    params, _semis, blanked = _scan(text)
    statements = _statements(text)
    m = _FIRST_WORD.match(blanked)
    kind = m.group(1).lower() if m else ""
    if kind == "with":  # a CTE: the statement's kind is that of its main verb
        verbs = re.findall(r"\b(select|insert|update|delete)\b", blanked, flags=re.IGNORECASE)
        kind = verbs[-1].lower() if verbs else "with"
    return SqlText(text, tuple(params), statements, kind)


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
