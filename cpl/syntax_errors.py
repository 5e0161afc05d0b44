"""Lark's parse failures → `CplSyntaxError`s that say, in CPL's terms, what was found and what was
expected, at the right place in the script."""

from __future__ import annotations

from lark import Token
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


def _listing(texts: list[str]) -> str:
    return "; expected " + (texts[0] if len(texts) == 1 else "one of " + ", ".join(texts))


def _in_pattern(names: set[str], after_number: bool) -> str | None:
    """What is expected at the places of a pattern where lark's list of next tokens would mislead,
    told by that list and by whether a number was the last token parsed (tests/cpl/
    test_pattern_syntax.py checks that each place is told apart in every state of the parser)."""
    if names == {"COMP_OP"} and not after_number:  # after a step's alias, whose `=` is a COMP_OP
        return "; expected '=' (a step is written alias=stream)"
    if "COMP_OP" in names and names <= {"COMP_OP", "INT", "COLON"}:  # in <n:m>: its `>` is a COMP_OP
        texts = sorted("'>'" if n == "COMP_OP" else _TERMINAL_TEXT[n] for n in names)
        return _listing(texts) + " (a count is written <n>, <n:m>, <n:> or <:m>)"
    if "EVERY" in names and "NAME" in names:  # where an element starts, which may be any name (not
        # after OUTPUT, where EVERY comes with the kinds of limit only)
        return "; expected a step alias=stream, NOT, EVERY or '('"
    if {"INT", "STRING", "COMP_OP"} <= names and "LPAR" not in names:  # in e[...], any part
        if "RSQB" in names:
            return "; expected ']' (an index is a number, last or last - n)"
        return "; expected a number, last or last - n between the brackets"
    return None


def _expected(names: set[str], after_number: bool = False) -> str:
    pattern = _in_pattern(names, after_number)
    if pattern is not None:
        return pattern
    texts = sorted({_TERMINAL_TEXT.get(n, n if n in KEYWORD_TOKENS else n.lower()) for n in names})
    if "a name" in texts and len(texts) > 8:
        return ""
    if len(texts) > 8:
        texts = [*texts[:8], "..."]
    return _listing(texts)


def _after_number(exc: UnexpectedInput) -> bool:
    """Whether the last token the parser took is a number (`<3:5` then `x`, not `e1` then `x`)."""
    parser = getattr(exc, "interactive_parser", None)
    stack = parser.parser_state.value_stack if parser is not None else []
    return bool(stack) and isinstance(stack[-1], Token) and stack[-1].type == "INT"


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
        msg = f"unexpected {str(tok)!r}{_expected(set(exc.expected), _after_number(exc))}"
        if tok.type in ("CREATE", "INSERT"):
            msg += " (is a ';' missing before this statement?)"
        return CplSyntaxError(msg, token_pos(chunk, tok))
    expected = set(exc.expected) if isinstance(exc, UnexpectedToken | UnexpectedEOF) else set()
    # End of statement: point just past its last character.
    text = chunk.text.rstrip()
    last_line = text.count("\n") + 1
    last_col = len(text) - (text.rfind("\n") + 1) + 1
    return CplSyntaxError(
        f"statement ends too early{_expected(expected, _after_number(exc))}",
        chunk.script_point(last_line, last_col),
    )
