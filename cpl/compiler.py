"""The CPL compiler: script text → operator graph.

    parse (cpl.parser) → plan statements in order (cpl.planner) → graph passes (cpl.passes)

Errors from every stage are collected; if there is any, one `CompileError` carries them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cpl import syntax_tree as ast
from cpl.errors import CompileError, Diagnostic, Diagnostics
from cpl.limits import MAX_EXPR_DEPTH, expr_depth
from cpl.parser import parse
from cpl.passes import PASSES
from cpl.planner import Planner
from cpl.syntax_tree import Pos
from operators.declarations import DescribeQuery
from operators.graph import Aggregate, Graph, Port
from operators.watermarks import held_by_other_streams


@dataclass(frozen=True)
class Compiled:
    graph: Graph
    warnings: list[Diagnostic]


def compile_script(
    source: str, filename: str = "<script>", *, describe: DescribeQuery | None = None
) -> Compiled:
    """Compile a script or raise `CompileError` with every error found.

    `describe`: the script's data stores, bound (stores/describe.py builds one from the bindings),
    asked for the result types of each SELECT (cpl.describe); without it, a SELECT without RETURNS
    has varchar results.
    """
    diags = Diagnostics()
    script = parse(source, diags)
    too_deep = _too_deep(script, diags)
    planner = Planner(diags)
    planner.state.describe = describe
    for stmt in script.statements:
        if id(stmt) in too_deep:  # planning it would recurse too deep; its error is reported
            if isinstance(stmt, ast.Insert):
                planner.state.failed.add(stmt.target.lower())
            continue
        planner.statement(stmt)
    state = planner.state
    for message, pos in state.warnings:
        diags.warning(message, pos)
    if (
        not diags.has_errors
        and not any(not s.is_source for s in state.streams.values())
        and not any(n.op == "Materialize" for n in state.nodes)
    ):
        diags.error("the script has no INSERT INTO ... SELECT statement: there is nothing to run")
    if diags.has_errors:
        raise CompileError(diags.sorted(), source, filename)
    graph = Graph(
        nodes=tuple(state.nodes),
        streams={s.name: s.port for s in state.streams.values()},
        stores={s.name: s for s in state.stores.values()},
        queries={q.name: q for q in state.queries.values()},
        tables={t.name: t for t in state.tables.values()},
        stream_lines={s.name: s.line for s in state.streams.values()},
    )
    for p in PASSES:
        graph = p(graph)
    consumed = {p.node for n in graph.nodes for p in n.inputs}
    for src in graph.sources():
        if src.id not in consumed:
            diags.warning(f"stream '{src.stream}' is declared but no statement reads it", _line_pos(src.line))
    for node in graph.nodes:
        # TIME windows and joins are bounded by the watermark (every timed stream has one); a count
        # or condition window per group is not: its open window waits for the group's next event.
        if isinstance(node, Aggregate) and node.window.kind in ("tuple", "batch") and node.keys:
            diags.warning(
                f"the {node.window.kind.upper()} window keeps each group's open window until the group's "
                "next events complete it; nothing expires it, so its state grows with the number of "
                "distinct groups: group by values from a bounded set, or use a TIME window",
                _line_pos(node.line),
            )
    _held_by_other_streams(graph, diags)
    return Compiled(graph, diags.sorted())


_FIRED = {"Aggregate": "TIME window", "Join": "join", "Pattern": "pattern", "OutputRate": "OUTPUT limit"}


def _held_by_other_streams(graph: Graph, diags: Diagnostics) -> None:
    """Warn of an operator the watermark fires whose rows meet other streams' without event time:
    Spark holds it back by their watermark too (operators.watermarks)."""
    roots = [port.node for port in graph.streams.values()] + [
        n.id for n in graph.nodes if n.op == "Materialize"
    ]
    for node_id, (root, others) in held_by_other_streams(graph, roots).items():
        node = graph.node(node_id)
        names = ", ".join(f"'{s}'" for s in others)
        diags.warning(
            f"on Spark this {_FIRED.get(node.op, node.op)} also waits for the watermark of {names}: its "
            f"rows meet theirs without event time at line {root.line}, which Spark runs as one query "
            "with one watermark, the least of its streams'; at the end of a bounded input what it "
            'would close beyond their watermark stays open there (docs/language.md, "A window beside '
            "another stream's rows\"): write its rows to a sink or table of their own",
            _line_pos(node.line),
            engine="spark",
        )


def _line_pos(line: int) -> Pos:
    return Pos(line, 1, line, 1)


def _expressions(node: object) -> Iterator[ast.Expr]:
    """The top-level expressions anywhere in a statement (select items, WHERE, windows, ...)."""
    for v in vars(node).values():
        items = v if isinstance(v, tuple) else (v,)
        for x in items:
            if isinstance(x, ast.Expr):
                yield x
            elif hasattr(x, "__dataclass_fields__") and not isinstance(x, ast.Pos):
                yield from _expressions(x)


def _too_deep(script: ast.Script, diags: Diagnostics) -> set[int]:
    """Statements with expressions deep enough to exhaust the recursive passes that follow."""
    bad: set[int] = set()
    for stmt in script.statements:
        for e in _expressions(stmt):
            if expr_depth(e) > MAX_EXPR_DEPTH:
                diags.error(
                    f"expression is nested more than {MAX_EXPR_DEPTH} levels deep; split it",
                    getattr(e, "pos", ast.NOPOS),
                )
                bad.add(id(stmt))
    return bad


def stream_port(graph: Graph, stream: str) -> Port:
    for name, port in graph.streams.items():
        if name.lower() == stream.lower():
            return port
    raise KeyError(stream)
