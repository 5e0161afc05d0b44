"""Lark's parse failures → `CplSyntaxError`s that say, in CPL's terms, what was found and what was
expected, at the right place in the script."""

from __future__ import annotations

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from cpl.errors import CplSyntaxError
from cpl.grammar import KEYWORD_TOKENS, token_pos
from cpl.splitter import Chunk

_TERMINAL_TEXT = {
    "NAME": "a name",
    "QUOTED_NAME": "a name",
    "STRING": "a string",
    "INT": "a number",
    "DECIMAL_NUMBER": "a number",
    "COMMA": "','",
    "LPAR": "'('",
    "RPAR": "')'",
    "DOT": "'.'",
    "STAR": "'*'",
    "COMP_OP": "a comparison",
    "ADD_OP": "'+', '-' or '||'",
    "MUL_OP": "'/' or '%'",
    "ARROW": "'->'",
    "COLON": "':'",
    "QMARK": "'?'",
    "LSQB": "'['",
    "RSQB": "']'",
    "$END": "the end of the statement",
}


def _expected(names: set[str]) -> str:
    texts = sorted({_TERMINAL_TEXT.get(n, n if n in KEYWORD_TOKENS else n.lower()) for n in names})
    if "a name" in texts and len(texts) > 8:
        return ""
    if len(texts) > 8:
        texts = [*texts[:8], "..."]
    return "; expected " + (texts[0] if len(texts) == 1 else "one of " + ", ".join(texts))


def syntax_error(exc: UnexpectedInput, chunk: Chunk) -> CplSyntaxError:
    if isinstance(exc, UnexpectedCharacters):
        pos = chunk.script_point(exc.line, exc.column)
        if exc.char == "'":
            return CplSyntaxError("string literal is not closed: a ' is missing", pos)
        if exc.char == '"':
            return CplSyntaxError('quoted name is not closed: a " is missing', pos)
        return CplSyntaxError(f"unexpected character {exc.char!r}", pos)
    if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        tok = exc.token
        msg = f"unexpected {str(tok)!r}{_expected(set(exc.expected))}"
        if tok.type in ("CREATE", "INSERT"):
            msg += " (is a ';' missing before this statement?)"
        return CplSyntaxError(msg, token_pos(chunk, tok))
    expected = set(exc.expected) if isinstance(exc, UnexpectedToken | UnexpectedEOF) else set()
    # End of statement: point just past its last character.
    text = chunk.text.rstrip()
    last_line = text.count("\n") + 1
    last_col = len(text) - (text.rfind("\n") + 1) + 1
    return CplSyntaxError(
        f"statement ends too early{_expected(expected)}", chunk.script_point(last_line, last_col)
    )
