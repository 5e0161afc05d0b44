"""Diagnostics: every error names the line and column and shows the offending text.

The compiler collects diagnostics instead of stopping at the first, and raises a single
`CompileError` holding all of them at the end of a run. Inside a stage, one problem is raised as a
`PositionedError` (`CplSyntaxError`, `TypeCheckError`, `PlanError`) and recorded as a diagnostic by
whoever handles the statement.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpl.syntax_tree import NOPOS, Pos


@dataclass(frozen=True)
class Diagnostic:
    message: str
    pos: Pos = NOPOS
    severity: str = "error"  # "error" | "warning"
    # A warning about one engine only ("spark"): a run on another engine does not print it.
    engine: str | None = None

    def render(self, source: str, filename: str = "<script>") -> str:
        """`file:line:col: error: message`, then the source line and a caret under the span."""
        if self.pos.line <= 0:
            return f"{filename}: {self.severity}: {self.message}"
        head = f"{filename}:{self.pos.line}:{self.pos.col}: {self.severity}: {self.message}"
        lines = source.splitlines()
        if self.pos.line > len(lines):
            return head
        text = lines[self.pos.line - 1].expandtabs(1)
        if len(text) > 200:  # do not echo a megabyte-long line back at the user
            start = max(0, self.pos.col - 80)
            text = ("..." if start else "") + text[start : start + 160] + "..."
            col = self.pos.col - start + (3 if start else 0)
        else:
            col = self.pos.col
        if self.pos.end_line == self.pos.line and self.pos.end_col > self.pos.col:
            width = self.pos.end_col - self.pos.col
        else:
            width = max(1, len(text) - col + 1)
        width = max(1, min(width, len(text) - col + 1, 160))
        gutter = f"{self.pos.line:>4} | "
        return f"{head}\n{gutter}{text}\n{' ' * len(gutter)}{' ' * (col - 1)}{'^' * width}"


class CompileError(Exception):
    """A script that does not compile; carries every diagnostic found."""

    def __init__(self, diagnostics: list[Diagnostic], source: str = "", filename: str = "<script>"):
        self.diagnostics = diagnostics
        self.source = source
        self.filename = filename
        super().__init__(self.render())

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def render(self) -> str:
        parts = [d.render(self.source, self.filename) for d in self.diagnostics]
        n = len(self.errors)
        parts.append(f"{n} error{'s' if n != 1 else ''} found")
        return "\n".join(parts)


class Diagnostics:
    """A collector passed through the compiler passes."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def error(self, message: str, pos: Pos = NOPOS) -> None:
        self.items.append(Diagnostic(message, pos))

    def warning(self, message: str, pos: Pos = NOPOS, engine: str | None = None) -> None:
        self.items.append(Diagnostic(message, pos, "warning", engine))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.items)

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.items, key=lambda d: (d.pos.line, d.pos.col))


class PositionedError(Exception):
    """One problem at a place in the script, raised inside a stage and reported as a diagnostic."""

    def __init__(self, message: str, pos: Pos):
        super().__init__(message)
        self.message = message
        self.pos = pos


class CplSyntaxError(PositionedError):
    """Text the grammar rejects, or a literal beyond the limits (`cpl.limits`)."""


class TypeCheckError(PositionedError):
    """An expression whose names do not resolve or whose types do not fit."""


class PlanError(PositionedError):
    """A statement that parses and types but cannot be planned into operators."""
