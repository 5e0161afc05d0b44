"""Stable dumps of an operator graph: text (golden tests, `cep explain`), JSON and Mermaid."""

from __future__ import annotations

import json
from typing import Any

from operators.graph import Graph, Node, Port


def _value(v: object) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _stream_names(graph: Graph) -> dict[Port, list[str]]:
    names: dict[Port, list[str]] = {}
    for name, port in graph.streams.items():
        names.setdefault(port, []).append(name)
    return names


def to_text(graph: Graph) -> str:
    """One block per node, in topological order; identical graphs always print identically."""
    names = _stream_names(graph)
    lines: list[str] = []
    for n in graph.nodes:
        ins = ", ".join(str(p) for p in n.inputs)
        head = f"{n.id} = {n.op}({ins})"
        lines.append(f"{head}  -- line {n.line}")
        for k, v in n.params().items():
            lines.append(f"    {k}: {_value(v)}")
        lines.append(f"    schema: {n.schema}")
        for i in range(max(n.outputs, 1) if n.outputs else 0):
            streams = names.get(Port(n.id, i))
            if streams:
                label = f"out[{i}]" if n.outputs > 1 else "out"
                lines.append(f"    {label}: {', '.join(sorted(streams))}")
    return "\n".join(lines) + "\n"


def node_json(n: Node) -> dict[str, Any]:
    return {
        "id": n.id,
        "op": n.op,
        "params": n.params(),
        "schema": [{"name": f.name, "type": str(f.type)} for f in n.schema],
        "event_time": n.event_time,
        "line": n.line,
    }


def to_json(graph: Graph) -> str:
    doc = {
        "nodes": [node_json(n) for n in graph.nodes],
        "edges": [{"from": p.node, "port": p.index, "to": to} for p, to in graph.edges()],
        "streams": {name: {"node": p.node, "port": p.index} for name, p in sorted(graph.streams.items())},
    }
    return json.dumps(doc, indent=2)


def _cut(text: str) -> str:
    return text[:57] + "..." if len(text) > 60 else text


def _mermaid_label(n: Node) -> str:
    params = n.params()
    detail = ""
    for key in ("stream", "window", "query", "table", "where", "project"):
        if key in params:
            detail = _cut(_value(params[key]))
            break
    if n.op == "ReadSQL":  # the result columns with their types (RETURNS, or the store's)
        columns = params["columns"]
        assert isinstance(columns, list)
        detail += "<br/>" + _cut(", ".join(str(c) for c in columns))
    text = f"{n.op}<br/>{detail}" if detail else n.op
    # Mermaid labels are quoted; escape what would end the quote or start markup.
    return (
        text.replace('"', "#quot;")
        .replace("<br/>", "\u0000")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("\u0000", "<br/>")
    )


def to_mermaid(graph: Graph) -> str:
    names = _stream_names(graph)
    lines = ["flowchart LR"]
    for n in graph.nodes:
        lines.append(f'    {n.id}["{_mermaid_label(n)}"]')
    for p, to in graph.edges():
        label = ", ".join(names.get(p, []))
        arrow = f"-->|{label}|" if label else "-->"
        lines.append(f"    {p.node} {arrow} {to}")
    return "\n".join(lines) + "\n"
