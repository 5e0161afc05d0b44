"""Script text → one `Chunk` per statement, split on the semicolons outside strings, quoted names
and comments, each remembering where it starts so positions inside it map back to the script.

Parsing one statement at a time gives error recovery for free: a syntax error is reported and the
next statement is parsed as usual, so a script with several errors reports all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cpl.syntax_tree import Pos


@dataclass(frozen=True)
class Chunk:
    text: str
    line: int  # where text starts in the script (1-based)
    col: int

    def script_position(self, line: int, col: int) -> tuple[int, int]:
        """A line/column inside the chunk (1-based) → the same place in the script."""
        return self.line + line - 1, col + (self.col - 1 if line == 1 else 0)

    def script_span(self, line: int, col: int, end_line: int, end_col: int) -> Pos:
        """A span inside the chunk → the same span in the script."""
        l1, c1 = self.script_position(line, col)
        l2, c2 = self.script_position(end_line, end_col)
        return Pos(l1, c1, l2, c2)

    def script_point(self, line: int, col: int) -> Pos:
        """One character inside the chunk → its one-character span in the script."""
        l1, c1 = self.script_position(line, col)
        return Pos(l1, c1, l1, c1 + 1)


def split_statements(source: str) -> Iterator[Chunk]:
    """Yield the statements of a script, split on semicolons outside strings, names and comments."""
    i, n = 0, len(source)
    start, line, col = 0, 1, 1
    start_line, start_col = 1, 1
    mode = ""  # "" | "'" | '"' | "--" | "/*"

    def advance(k: int) -> None:
        nonlocal i, line, col
        for _ in range(k):
            if source[i] == "\n":
                line, col = line + 1, 1
            else:
                col += 1
            i += 1

    while i < n:
        c = source[i]
        if mode == "":
            if c == ";":
                yield Chunk(source[start:i], start_line, start_col)
                advance(1)
                start, start_line, start_col = i, line, col
                continue
            if c in "'\"":
                mode = c
            elif source.startswith("--", i):
                mode = "--"
            elif source.startswith("/*", i):
                mode = "/*"
                advance(2)
                continue
        elif mode in "'\"":
            if c == mode:
                if i + 1 < n and source[i + 1] == mode:  # doubled quote escapes itself
                    advance(2)
                    continue
                mode = ""
        elif mode == "--":
            if c == "\n":
                mode = ""
        elif mode == "/*" and source.startswith("*/", i):
            mode = ""
            advance(2)
            continue
        advance(1)
    yield Chunk(source[start:], start_line, start_col)


def is_blank(text: str) -> bool:
    """True when a chunk holds only white space and comments."""
    return all(ch.isspace() for ch in _comment_free(text))


def _comment_free(text: str) -> Iterator[str]:
    i, n = 0, len(text)
    while i < n:
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            yield text[i]
            i += 1
