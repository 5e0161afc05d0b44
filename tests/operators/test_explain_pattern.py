"""`cep explain --format mermaid` draws a Pattern node's automaton (operators.explain): a subgraph of
its states linked to the node, an edge per state labelled with what it waits for (a step, a count,
an absence, an AND/OR), EVERY as a dotted edge back, WITHIN as a note, labels escaped as the nodes'
are."""

from __future__ import annotations

import re

from cpl.compiler import compile_script
from operators.explain import to_mermaid

HEAD = (
    "CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, ts timestamp\n"
    "  TIMESTAMP BY ts;\n"
    "CREATE STREAMSCHEMA acks WITH id integer, note varchar, ts timestamp TIMESTAMP BY ts;\n"
)
PATTERN = (
    "INSERT INTO out SELECT e1.idcaller AS c, count(e2.idreceiver) AS n, match_time() AS t\n"
    "FROM PATTERN EVERY e1=cdr[duration > 10] -> e2=cdr[idreceiver = e1.idreceiver]<2:>\n"
    "  -> NOT cdr[duration > 3600] FOR 10 minutes WITHIN 1 hour PARTITION BY idcaller;\n"
)


def mermaid(script: str) -> list[str]:
    return to_mermaid(compile_script(HEAD + script).graph).splitlines()


NODE = re.compile(r'(\w+)(\(\(\(|\(\(|\[|>)"([^"]*)"(\)\)\)|\)\)|\])')
EDGE = re.compile(r'(\w+) (-->|-\.->|-\.-)(?:\|"([^"]*)"\||\|([^|"]*)\|)? (\w+)')


def check_well_formed(lines: list[str]) -> None:
    """A flowchart whose subgraphs open and close in order, whose edges join declared nodes (or
    subgraphs), and whose labels hold no raw quote or angle bracket but the `<br/>` line breaks."""
    assert lines[0] == "flowchart LR"
    depth = 0
    declared: set[str] = set()
    labels: list[str] = []
    edges: list[tuple[str, str]] = []
    for line in lines[1:]:
        text = line.strip()
        if text.startswith("subgraph "):
            depth += 1
            sub = NODE.fullmatch(text.removeprefix("subgraph "))
            assert sub is not None and sub[2] == "[", line
            declared.add(sub[1])
            labels.append(sub[3])
        elif text == "end":
            depth -= 1
            assert depth >= 0, line
        elif node := NODE.fullmatch(text):
            declared.add(node[1])
            labels.append(node[3])
        elif edge := EDGE.fullmatch(text):
            edges.append((edge[1], edge[5]))
            labels.append(edge[3] or edge[4] or "")
        else:
            assert text == "direction LR", line
    assert depth == 0
    assert all(a in declared and b in declared for a, b in edges), edges
    assert not [t for t in labels if re.search(r'[<>"]', t.replace("<br/>", ""))]


def test_a_pattern_node_gets_its_automaton() -> None:
    lines = mermaid(PATTERN)
    check_well_formed(lines)
    assert '    n3["Pattern<br/>[e1.idcaller AS c, count(e2.idreceiver) AS n, match_time(..."]' in lines
    start = lines.index('    subgraph n3_automaton["n3: PATTERN, PARTITION BY cdr.idcaller"]')
    assert lines[start:] == [
        '    subgraph n3_automaton["n3: PATTERN, PARTITION BY cdr.idcaller"]',
        "        direction LR",
        '        n3_s0(("s0"))',
        '        n3_s1(("s1"))',
        '        n3_s2(("s2"))',
        '        n3_match((("match")))',
        '        n3_s0 -->|"e1=cdr[(duration #gt; 10)]"| n3_s1',
        '        n3_s1 -->|"e2=cdr[(idreceiver = e1.idreceiver)]#lt;2:#gt;"| n3_s2',
        '        n3_s2 -->|"NOT cdr[(duration #gt; 3600)] FOR 10 MINUTES"| n3_match',
        '        n3_s1 -.->|"EVERY"| n3_s0',
        '        n3_within>"WITHIN 1 HOUR"]',
        "    end",
        "    n3 -.- n3_automaton",
    ]


def test_groups_logical_steps_exact_counts_and_sequences() -> None:
    """EVERY over a group waits again at its start once the group completes (here: at the match);
    an AND/OR is one edge; `<3>` is an exact count; a SEQUENCE says so; each Pattern node has its
    own subgraph; text in conditions is escaped, `#` included (Mermaid's entity codes start with it)."""
    lines = mermaid(
        "INSERT INTO a SELECT e1.id AS i FROM PATTERN EVERY (e1=acks[note = 'say \"<hi>\" #1;']\n"
        "  -> (NOT cdr FOR 1 SECOND OR e3=cdr<3>));\n"
        "INSERT INTO b SELECT e1.id AS i FROM SEQUENCE e1=acks, e2=cdr WITHIN 5 SECONDS;\n"
    )
    check_well_formed(lines)
    assert "        n3_s0 -->|\"e1=acks[(note = 'say #quot;#lt;hi#gt;#quot; #35;1;')]\"| n3_s1" in lines
    assert '        n3_s1 -->|"(NOT cdr FOR 1 SECOND OR e3=cdr#lt;3#gt;)"| n3_match' in lines
    assert '        n3_match -.->|"EVERY"| n3_s0' in lines
    assert '    subgraph n4_automaton["n4: SEQUENCE"]' in lines
    assert '        n4_s0 -->|"e1=acks"| n4_s1' in lines
    assert '        n4_within>"WITHIN 5 SECONDS"]' in lines
    assert not any("EVERY" in line for line in lines if line.startswith("        n4_"))
    assert [line.strip() for line in lines].count("end") == 2
    assert "    n3 -.- n3_automaton" in lines and "    n4 -.- n4_automaton" in lines


def test_graphs_without_patterns_are_unchanged() -> None:
    lines = mermaid("INSERT INTO long SELECT idcaller FROM cdr WHERE duration > 3600;\n")
    assert not any("subgraph" in line for line in lines)
    check_well_formed(lines)
