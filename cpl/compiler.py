"""The CPL compiler: script text → operator graph.

    parse (cpl.parser) → plan statements in order (cpl.planner) → graph passes (cpl.passes)

Errors from every stage are collected; if there is any, one `CompileError` carries them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpl.errors import CompileError, Diagnostic, Diagnostics
from cpl.parser import MAX_EXPR_DEPTH, expr_depth, parse
from cpl.passes import PASSES
from cpl.planner import Planner
from operators.graph import Graph, Port


@dataclass(frozen=True)
class Compiled:
    graph: Graph
    warnings: list[Diagnostic]


def compile_script(source: str, filename: str = "<script>") -> Compiled:
    """Compile a script or raise `CompileError` with every error found."""
    diags = Diagnostics()
    script = parse(source, diags)
    _check_depth(script, diags)
    planner = Planner(diags)
    for stmt in script.statements:
        planner.statement(stmt)
    if not diags.has_errors and not any(not s.is_source for s in planner.streams.values()) and not any(
        n.op == "Materialize" for n in planner.nodes
    ):
        diags.error("the script has no INSERT INTO ... SELECT statement: there is nothing to run")
    if diags.has_errors:
        raise CompileError(diags.sorted(), source, filename)
    graph = Graph(
        nodes=tuple(planner.nodes),
        streams={s.name: s.port for s in planner.streams.values()},
        stores={s.name: s for s in planner.stores.values()},
        queries={q.name: q for q in planner.queries.values()},
        tables={t.name: t for t in planner.tables.values()},
    )
    for p in PASSES:
        graph = p(graph)
    consumed = {p.node for n in graph.nodes for p in n.inputs}
    for src in graph.sources():
        if src.id not in consumed:
            diags.warning(f"stream '{src.stream}' is declared but no statement reads it", _line_pos(src.line))
    return Compiled(graph, diags.sorted())


def _line_pos(line: int):  # type: ignore[no-untyped-def]
    from cpl.ast import Pos

    return Pos(line, 1, line, 1)


def _check_depth(script, diags: Diagnostics) -> None:  # type: ignore[no-untyped-def]
    from cpl import ast

    def exprs(node: object) -> list[ast.Expr]:
        out: list[ast.Expr] = []
        for v in vars(node).values():
            if isinstance(v, ast.Expr):
                out.append(v)
            elif isinstance(v, tuple):
                for x in v:
                    if isinstance(x, ast.Expr):
                        out.append(x)
                    elif hasattr(x, "__dataclass_fields__"):
                        out.extend(exprs(x))
            elif hasattr(v, "__dataclass_fields__") and not isinstance(v, ast.Pos):
                out.extend(exprs(v))
        return out

    for stmt in script.statements:
        for e in exprs(stmt):
            if expr_depth(e) > MAX_EXPR_DEPTH:
                diags.error(f"expression is nested more than {MAX_EXPR_DEPTH} levels deep; split it", e.pos)  # type: ignore[attr-defined]


def stream_port(graph: Graph, stream: str) -> Port:
    for name, port in graph.streams.items():
        if name.lower() == stream.lower():
            return port
    raise KeyError(stream)
