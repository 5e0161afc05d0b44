"""Unheld streams on both engines, generated: a stream with a WATERMARK delay that only TIME windows
read, through WHEREs, SELECTs and `ON SQL` reads, passes no Sequencer on Spark (its file source marks
its late events: deployer.spark.run.held), nor do two streams merged so; the reference executor
holds their events back and releases them in event-time order. Hypothesis draws the delay, a second
stream merged or not (with events, none, or only records it rejects), the statements on the way
(with expressions that fail on some events), one or two windows and their aggregates, and events
out of order by up to twice the delay (so some are late and some only out of order), cut into files
Spark reads a few at a time; both engines must write the same rows, dead letters and counts
(tests/fuzz/fuzz_harness.check_case).

The generator of the differential fuzzer (fuzz_scripts) draws such scripts too, but rarely (about
one case in a hundred: it binds streams between statements to sinks, and often reads a second
source), too rarely for the few cases a test run draws.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fuzz_case import Case, StoreTable
from fuzz_harness import check_case
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from cpl.compiler import compile_script
from deployer.spark.run import held

pytestmark = [pytest.mark.spark]

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DELAYS = {"1 SECOND": 1000, "1500 ms": 1500, "5 SECONDS": 5000}
RATES = StoreTable(
    "rates",
    "CREATE TABLE rates (k integer PRIMARY KEY, rate integer)",
    ("k", "rate"),
    ((1, 3), (2, 0), (3, 7)),
)
STORE = (
    "CREATE DATASTORE db TYPE sqlite;\n"
    "CREATE SQLQUERY rate_of ON db AS 'SELECT rate FROM rates WHERE k = ?' RETURNS (rate integer);\n"
)
# statements on the way, each reading the stream before it (`{i}`) and making `{o}`; some fail on
# some events (a division by v or by a rate of 0)
STEPS = [
    "INSERT INTO {o} SELECT k, v, ts FROM {i} WHERE v <> 4;\n",
    "INSERT INTO {o} SELECT k, 100 / v AS v, ts FROM {i};\n",
    "INSERT INTO {o} SELECT k, v * 3 + k AS v, ts FROM {i} WHERE 10 / (v - 5) >= 0;\n",
    "INSERT INTO {o} SELECT k, v + r.rate AS v, ts FROM {i} ON SQL rate_of, r, k, rate;\n",
    "INSERT INTO {o} SELECT k, v / r.rate AS v, ts FROM {i} ON SQL rate_of, r, k, rate;\n",
]
WINDOWS = ["TIME SIZE 2 SECONDS", "TIME SIZE 3 SECONDS ADVANCE 1 SECOND", "TIME SIZE 10 SECONDS"]
AGGREGATES = ["count(*) AS n", "sum(v) AS total", "min(v) AS lo", "max(v) AS hi", "avg(v) AS mean"]


def _events(draw: Any, delay_ms: int) -> list[str]:
    """20 to 60 events out of order by up to twice the delay, then one 30 s after the last."""
    events, t = [], 0
    for _ in range(draw(st.integers(20, 60))):
        t += draw(st.sampled_from([0, 100, 300, 700, 1200]))
        back = draw(st.sampled_from([0, 0, 0, delay_ms // 2, delay_ms, delay_ms + 1, 2 * delay_ms]))
        events.append((max(0, t - back), draw(st.integers(1, 3)), draw(st.integers(0, 9))))
    events.append((t + 30_000, 1, 1))  # moves the watermark past every window before it
    return [
        json.dumps(
            {"k": k, "v": v, "ts": (T0 + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")}
        )
        for ms, k, v in events
    ]


def _files(draw: Any, lines: list[str]) -> list[list[str]]:
    cuts = sorted(draw(st.lists(st.integers(0, len(lines)), min_size=1, max_size=4)))
    return [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]


def _schema(name: str, delay: str) -> str:
    return f"CREATE STREAMSCHEMA {name} WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK {delay};\n"


@st.composite
def unheld_cases(draw: Any, merged: bool) -> Case:
    """A stream alone, or two `merged` (the second with its own delay, and at times no event: no
    file, or only records it rejects; the merge must not wait for it at the end)."""
    delay_text, delay_ms = draw(st.sampled_from(sorted(DELAYS.items())))
    script = _schema("s", delay_text)
    inputs = {"s": _files(draw, _events(draw, delay_ms))}
    last = "s"
    if merged:
        other_text, other_ms = draw(st.sampled_from(sorted(DELAYS.items())))
        script += _schema("s2", other_text) + "INSERT INTO m SELECT * FROM s, s2;\n"
        silent = draw(st.sampled_from([[], [["{not json"]], None, None, None]))
        inputs["s2"] = silent if silent is not None else _files(draw, _events(draw, other_ms))
        last = "m"
    steps = draw(st.lists(st.sampled_from(STEPS), max_size=3))
    store = any("ON SQL" in s for s in steps)
    script += STORE if store else ""
    for n, step in enumerate(steps):
        script += step.format(i=last, o=f"t{n}")
        last = f"t{n}"
    sinks = []
    for w in range(draw(st.integers(1, 2))):
        aggs = draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=3, unique=True))
        window = draw(st.sampled_from(WINDOWS))
        having = " HAVING count(*) > 1" if draw(st.booleans()) else ""
        script += (
            f"INSERT INTO w{w} SELECT k, window_start() AS at, {', '.join(aggs)} "
            f"FROM {last} WINDOW {window} GROUP BY k{having};\n"
        )
        sinks.append(f"w{w}")
    return Case(
        script=script,
        inputs=inputs,
        sinks=sinks,
        store="sqlite" if store else None,
        tables=[RATES] if store else [],
        max_files=draw(st.sampled_from([1, 2, None])),
        ordered={s: ["k"] for s in sinks},
    )


@pytest.mark.parametrize("merged", [False, True], ids=["alone", "merged"])
def test_unheld_streams_give_the_references_windows(spark: Any, tmp_path_factory: Any, merged: bool) -> None:
    """Whether a window closes with rows in it is the inputs' to say (a case whose events all fail
    on the way has none): most cases must have some, or the test compares little."""
    with_rows: list[bool] = []

    @seed(40)
    @settings(max_examples=5, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=unheld_cases(merged))
    def engines_agree(case: Case) -> None:
        graph = compile_script(case.script).graph
        streams = sorted(case.inputs)
        assert held.unheld(graph, {s: "file:in" for s in streams}, case.sinks) == streams, case.script
        ref = check_case(case, spark, None, Path(tmp_path_factory.mktemp("unheld")))
        assert ref.error is None, ref.error
        with_rows.append(any(ref.streams.get(s) for s in case.sinks))

    engines_agree()
    assert sum(with_rows) >= 3, with_rows
