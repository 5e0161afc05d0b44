"""Workload 7: compile time of a 1,000-statement CPL script (issue: under a second on this machine).

The script is the paper's billing pipeline repeated over 250 independent stream pairs, so it has
declarations, unions, filters, maps and windowed aggregates in realistic proportions.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from cpl.compiler import compile_script


def script(statements: int = 1000) -> str:
    parts: list[str] = ["CREATE WINDOW daily AS TIME SIZE 1 DAY ADVANCE 1 DAY;"]
    i = 0
    while sum(p.count(";") for p in parts) < statements:
        parts.append(
            f"CREATE STREAMSCHEMA a{i} WITH idcaller integer, idreceiver integer, duration integer, ts timestamp TIMESTAMP BY ts;\n"
            f"CREATE STREAMSCHEMA b{i} WITH idcaller integer, idreceiver integer, duration integer, ts timestamp TIMESTAMP BY ts;\n"
            f"INSERT INTO u{i} SELECT * FROM a{i}, b{i};\n"
            f"INSERT INTO c{i} SELECT idcaller, duration * 10 + 10 AS cost, ts FROM u{i} WHERE duration >= 10;\n"
            f"INSERT INTO bill{i} SELECT idcaller, sum(cost) AS total FROM c{i} WINDOW daily GROUP BY idcaller;"
        )
        i += 1
    return "\n".join(parts)


def run(repeats: int = 5, statements: int = 1000) -> dict[str, float]:
    text = script(statements)
    n = text.count(";")
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        graph = compile_script(text).graph
        times.append(time.perf_counter() - t0)
    return {
        "statements": n,
        "nodes": len(graph.nodes),
        "median_s": statistics.median(times),
        "best_s": min(times),
        "statements_per_s": n / statistics.median(times),
    }


if __name__ == "__main__":
    result = run()
    json.dump(result, sys.stdout, indent=2)
    print()
