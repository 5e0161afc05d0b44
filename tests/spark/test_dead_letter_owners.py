"""The query that wrote a failure point's dead letters keeps them when a later version of the script
adds a query that could write them too and comes first in the plan (deployer.spark.run.
dead_letter_owners): the new query reads its inputs from the beginning, and taking them over it
wrote a rejected record a second time, in another batch's file (by hand: a TUPLE window's sink,
then two stateless sinks added beside it, whose shared query comes first)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import assert_same_dead_letters, call_files, collect, compile_text, prepare, run_reference

from deployer.spark.run import dead_letter_owners
from deployer.spark.run.dead_letter_owners import owners_of
from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.queries import DEAD_LETTERS, Query, plan_queries, store_kinds

SOURCES = {"calls": "file:x"}
WINDOW = """
CREATE STREAMSCHEMA calls WITH k integer, caller integer, n integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO ratio SELECT k, caller, 100 / n AS r, ts FROM calls;
INSERT INTO per_caller SELECT caller, count(*) AS c, sum(r) AS rs
  FROM ratio WINDOW TIME SIZE 10 SECONDS GROUP BY caller;
"""
# two stateless sinks added: their shared query reads `calls` too, and comes first in the plan
ADDED = (
    WINDOW
    + """
INSERT INTO odd SELECT k, ts FROM calls WHERE k % 2 = 1;
INSERT INTO even SELECT k, ts FROM calls WHERE k % 2 = 0;
"""
)


def _plan(script: str, sinks: list[str], owners: Any = None) -> dict[str, Query]:
    plan = plan_queries(compile_text(script), sinks, SOURCES, store_kinds(None), (), None, owners)
    return {q.name: q for q in plan}


def test_a_sources_rejected_records_stay_with_the_query_that_wrote_them() -> None:
    first = _plan(WINDOW, ["per_caller"])
    assert first["sink:per_caller"].spooled[:2] == ("input-calls", "late-calls")
    owners = owners_of(first.values())
    assert owners["input-calls"] == "sink:per_caller"
    # planned afresh, the shared query of the new sinks would write them, from the beginning
    fresh = _plan(ADDED, ["per_caller", "odd", "even"])
    assert fresh["sinks:stateless"].spooled[:2] == ("input-calls", "late-calls")
    kept = _plan(ADDED, ["per_caller", "odd", "even"], owners)
    assert kept["sink:per_caller"].spooled[:2] == ("input-calls", "late-calls")
    assert "input-calls" not in kept["sinks:stateless"].spooled
    assert "rejected records of calls (by its tasks)" in kept["sink:per_caller"].writes
    # an owner that can no longer write them (its sink removed) gives them to the first that can
    assert "input-calls" in _plan(ADDED, ["odd", "even"], owners)["sinks:stateless"].spooled


def test_the_dead_letters_query_keeps_what_it_wrote() -> None:
    # A stream merged with itself is read on two paths of its query: the dead-letters query writes
    # its rejected records (tests/spark/test_dead_letters_by_readers.py) ...
    merged = (
        "CREATE STREAMSCHEMA s1 WITH k integer, b boolean, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO m1 SELECT k, b, ts FROM s1 WHERE b;\n"
        "INSERT INTO u2 SELECT * FROM m1, s1;\n"
    )
    sources = {"s1": "file:x"}
    first = plan_queries(compile_text(merged), ["u2"], sources, {})
    owners = owners_of(first)
    assert owners["input-s1"] == DEAD_LETTERS
    # ... and still does once a sink that reads the stream once is added, which would write them
    more = merged + "INSERT INTO ks SELECT k FROM s1;\n"
    apart = {"sink:u2": {"u2"}}  # u2's query has started: it keeps it
    fresh = plan_queries(compile_text(more), ["u2", "ks"], sources, {}, (), apart)
    assert [q.name for q in fresh] == ["sink:u2", "sink:ks"] and "input-s1" in fresh[1].spooled
    kept = plan_queries(compile_text(more), ["u2", "ks"], sources, {}, (), apart, owners)
    assert [q.name for q in kept] == ["sink:u2", "sink:ks", DEAD_LETTERS]
    assert "input-s1" not in kept[1].spooled and kept[2].reads == ("s1",)
    assert owners_of(kept)["input-s1"] == DEAD_LETTERS


def test_a_windows_failures_stay_with_the_sink_that_wrote_them() -> None:
    # A HAVING that can fail: the failures of the window's rows are written with them by the sink
    # that writes its rows through Maps only; or, past a WHERE, by the tasks of the first query
    # computing the window. A sink added first in the plan would take either over.
    script = """
CREATE STREAMSCHEMA calls WITH k integer, caller integer, n integer, ts timestamp TIMESTAMP BY ts;
CREATE WINDOW ten AS TIME SIZE 10 SECONDS;
INSERT INTO w SELECT caller, sum(n) AS s FROM calls WINDOW ten GROUP BY caller HAVING 100 / sum(n) > 1;
INSERT INTO callers SELECT caller FROM w;
INSERT INTO big SELECT caller, s FROM w WHERE s > 10;
"""
    owners = owners_of(_plan(script, ["callers", "big"]).values())
    window = compile_text(script).streams["w"].node
    assert owners[f"along {window}"] == "sink:callers"
    added = (
        script
        + "INSERT INTO named SELECT caller, s FROM w;\nINSERT INTO small SELECT s FROM w WHERE s <= 10;\n"
    )
    order = ["named", "small", "callers", "big"]
    fresh, kept = _plan(added, order), _plan(added, order, owners)
    assert f"failures of {window}" in fresh["sink:named"].writes
    assert f"failures of {window}" in kept["sink:callers"].writes
    assert f"failures of {window}" not in kept["sink:named"].writes
    assert owners_of(kept.values()) == owners | owners_of(kept.values())  # the same owners, more of them
    # past a WHERE only, the first query that computes the window writes them with its tasks
    owners = owners_of(_plan(added, ["big"]).values())
    assert owners[window] == "sink:big"
    fresh, kept = _plan(added, ["small", "big"]), _plan(added, ["small", "big"], owners)
    assert window in fresh["sink:small"].spooled and window not in fresh["sink:big"].spooled
    assert window in kept["sink:big"].spooled and window not in kept["sink:small"].spooled


def test_the_record_is_kept_whole(tmp_path: Path) -> None:
    assert dead_letter_owners.read(tmp_path) == {}
    dead_letter_owners.write(tmp_path, {"input-calls": "sink:a", "n3": "failed:n3"})
    dead_letter_owners.write(tmp_path, {"input-calls": "sink:b"})  # a failure point given over
    assert dead_letter_owners.read(tmp_path) == {"input-calls": "sink:b", "n3": "failed:n3"}


@pytest.mark.spark
def test_stateless_sinks_added_beside_a_window_write_no_dead_letter_again(spark: Any, tmp_path: Path) -> None:
    files = call_files(4)
    sources = prepare(tmp_path, {"calls": files})
    ck = tmp_path / "ck"

    def run(script: str, sinks: list[str], files_per_batch: int | None) -> None:
        deployment = SparkDeployment(
            spark,
            compile_text(script),
            sources,
            {s: f"file:{tmp_path / 'spark-out'}" for s in sinks},
            str(ck),
            dead_letter=f"file:{tmp_path / 'spark-dead'}",
            until_idle=True,
            max_files_per_trigger=files_per_batch,
        )
        deployment.run(out=io.StringIO())

    run(WINDOW, ["per_caller"], 1)  # a file a batch: its rejected records in batches 0 to 3
    run(ADDED, ["per_caller", "odd", "even"], None)  # the new query reads all four files at once
    ref = run_reference(compile_text(ADDED), tmp_path / "ref", sources, ["per_caller", "odd", "even"])
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", ["per_caller", "odd", "even"])
    assert_same_dead_letters(ref, spk)  # each once
    assert sorted(spk.streams["odd"], key=str) == sorted(ref.streams["odd"], key=str)
    assert len(ref.streams["odd"]) >= 8
