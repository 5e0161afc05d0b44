"""Stable dumps of an operator graph: text (golden tests, `cep explain`), JSON and Mermaid."""

from __future__ import annotations

import json
from typing import Any

from operators.declarations import format_ms
from operators.graph import Graph, Node, Port
from operators.pattern_node import Pattern
from operators.patterns import Absence, Automaton, Element, Logical, Step


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
    for key in ("stream", "window", "query", "table", "where", "project", "output"):
        if key in params:
            detail = _cut(_value(params[key]))
            break
    if n.op == "ReadSQL":  # the result columns with their types (RETURNS, or the store's)
        columns = params["columns"]
        assert isinstance(columns, list)
        detail += "<br/>" + _cut(", ".join(str(c) for c in columns))
    text = f"{n.op}<br/>{detail}" if detail else n.op
    return _escape(text)


def _escape(text: str) -> str:
    """Mermaid labels are quoted; escape what would end the quote, start markup or read as an entity
    code (`#…;`), keeping the `<br/>` line breaks."""
    return (
        text.replace("#", "#35;")
        .replace('"', "#quot;")
        .replace("<br/>", "\u0000")
        .replace("<", "#lt;")
        .replace(">", "#gt;")
        .replace("\u0000", "<br/>")
    )


def _step_text(e: Step | Absence, a: Automaton, streams: tuple[str, ...]) -> str:
    """`alias=stream[condition]<min:max>` or `NOT stream[condition] FOR d`, from the automaton's data."""
    cond = f"[{e.condition.expr.to_cpl()}]" if e.condition is not None else ""
    if isinstance(e, Absence):
        wait = f" FOR {format_ms(e.wait_ms)}" if e.wait_ms is not None else ""
        return f"NOT {streams[e.input]}{cond}{wait}"
    slot = a.slots[e.slot]
    count = ""
    if e.counted:
        count = f"<{e.min}>" if e.min == e.max else f"<{e.min}:{'' if e.max is None else e.max}>"
    return f"{slot.alias}={streams[slot.input]}{cond}{count}"


def _element_text(e: Element, a: Automaton, streams: tuple[str, ...]) -> str:
    if isinstance(e, Logical):
        left, right = _element_text(e.left, a, streams), _element_text(e.right, a, streams)
        return f"({left} {e.op.upper()} {right})"
    return _step_text(e, a, streams)


def _automaton(n: Pattern) -> list[str]:
    """A Pattern node's automaton as a subgraph linked to the node: a circle per state (s0, s1, …,
    then `match`), an edge per state labelled with what it waits for, a dotted edge back from where
    a state leads to where its EVERY waits again, WITHIN as a note."""
    a, sub = n.automaton, f"{n.id}_automaton"
    states = [f"{n.id}_s{i}" for i in range(len(a.states))] + [f"{n.id}_match"]
    title = f"{n.id}: {a.kind.upper()}"
    if n.partition is not None:
        keys = (
            f"{s}.{sc.fields[i].name}"
            for s, sc, i in zip(n.streams, n.input_schemas, n.partition, strict=True)
        )
        title += f", PARTITION BY {', '.join(keys)}"
    lines = [f'    subgraph {sub}["{_escape(title)}"]', "        direction LR"]
    lines += [f'        {s}(("s{i}"))' for i, s in enumerate(states[:-1])]
    lines.append(f'        {states[-1]}((("match")))')
    for i, state in enumerate(a.states):
        label = _escape(_element_text(state.element, a, n.streams))
        lines.append(f'        {states[i]} -->|"{label}"| {states[i + 1]}')
    for i, state in enumerate(a.states):
        if state.every is not None:
            lines.append(f'        {states[i + 1]} -.->|"EVERY"| {states[state.every]}')
    if a.within_ms is not None:
        lines.append(f'        {n.id}_within>"WITHIN {format_ms(a.within_ms)}"]')
    lines += ["    end", f"    {n.id} -.- {sub}"]
    return lines


def to_mermaid(graph: Graph) -> str:
    names = _stream_names(graph)
    lines = ["flowchart LR"]
    for n in graph.nodes:
        lines.append(f'    {n.id}["{_mermaid_label(n)}"]')
    for p, to in graph.edges():
        label = ", ".join(names.get(p, []))
        arrow = f"-->|{label}|" if label else "-->"
        lines.append(f"    {p.node} {arrow} {to}")
    for n in graph.nodes:
        if isinstance(n, Pattern):
            lines += _automaton(n)
    return "\n".join(lines) + "\n"
