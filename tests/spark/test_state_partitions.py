"""State partitions per query (deployer.spark.run.partitions): a query whose every stateful operator
keeps one group (a pattern without PARTITION BY, an aggregate without GROUP BY, an OUTPUT limit)
makes its checkpoint with one state partition, so no task of its runs empty every micro-batch; any
other with CEP_SHUFFLE_PARTITIONS. A checkpoint made before, with more, resumes with what it has
(Spark takes the count back from the checkpoint) and loses no open match or window.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    assert_same,
    at,
    cdrs,
    compile_text,
    prepare,
    read_jsonl,
    run_reference,
    run_spark,
    split_by_time,
    write_files,
)

from deployer.spark.run import starting
from deployer.spark.run.checkpoint import query_dir
from deployer.spark.run.partitions import state_partitions
from deployer.spark.run.queries import plan_queries

CDR = (
    "CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp"
    " TIMESTAMP BY timestamp WATERMARK 1 MINUTE;\n"
)
PEOPLE = "CREATE STREAMSCHEMA people WITH idcaller integer, name string, timestamp timestamp TIMESTAMP BY timestamp;\n"

# sink -> (its statement, whether its query's state keeps one group)
STATEMENTS = {
    "unanswered": (
        "INSERT INTO unanswered SELECT e1.idcaller AS c, e1.timestamp AS t1, match_time() AS t "
        "FROM PATTERN EVERY e1=cdr[duration >= 600] -> NOT cdr[idcaller = e1.idcaller AND duration > 100] "
        "FOR 20 MINUTES WITHIN 1 HOUR;",
        True,
    ),
    "bursts": (
        "INSERT INTO bursts SELECT e1.idcaller AS c, e1.timestamp AS t1, count(e2.idreceiver) AS n, match_time() AS t "
        "FROM PATTERN EVERY e1=cdr[duration > 100] -> e2=cdr<2:> -> e3=cdr[duration < 10] "
        "WITHIN 1 HOUR PARTITION BY idcaller;",
        False,
    ),
    "totals": (
        "INSERT INTO totals SELECT count(*) AS calls, sum(duration) AS total FROM cdr WINDOW TIME SIZE 10 MINUTES;",
        True,
    ),
    "per_caller": (
        "INSERT INTO per_caller SELECT idcaller, count(*) AS calls FROM cdr WINDOW TIME SIZE 1 HOUR "
        "GROUP BY idcaller;",
        False,
    ),
    "recent": ("INSERT INTO recent SELECT sum(duration) AS total FROM cdr WINDOW TUPLE SIZE 5;", True),
    "spells": (
        "INSERT INTO spells SELECT count(*) AS calls FROM cdr WINDOW BATCH START duration > 100 "
        "STOP duration < 60;",
        True,
    ),
    "sampled": ("INSERT INTO sampled SELECT idcaller, duration FROM cdr OUTPUT EVERY 7 EVENTS;", True),
    "lasts": (
        "INSERT INTO lasts SELECT idcaller, duration FROM cdr GROUP BY idcaller OUTPUT LAST EVERY 25 MINUTES;",
        True,
    ),
    # a keyed window behind a limit: the window decides
    "latest": (
        "INSERT INTO latest SELECT idcaller, count(*) AS calls FROM cdr WINDOW TUPLE SIZE 3 "
        "GROUP BY idcaller OUTPUT LAST EVERY 30 MINUTES;",
        False,
    ),
    "named": (
        "INSERT INTO named SELECT cdr.idcaller, people.name FROM cdr WINDOW TIME SIZE 10 MINUTES, "
        "people WINDOW TIME SIZE 10 MINUTES WHERE cdr.idcaller = people.idcaller;",
        False,
    ),
}


def test_a_query_whose_state_keeps_one_group_gets_one_partition() -> None:
    graph = compile_text(CDR + PEOPLE + "\n".join(s for s, _ in STATEMENTS.values()))
    sources = {s.stream: f"file:/in/{s.stream}" for s in graph.sources()}
    for sink, (_, one) in STATEMENTS.items():
        # each alone: the sinks of patterns over the same streams would share a query
        # (deployer.spark.run.pattern_groups), whose keys spread if one of them does
        (query,) = [q for q in plan_queries(graph, [sink], sources, {}) if sink in q.writes]
        assert query.stateful, sink  # each has state, else it would need no partition at all
        assert state_partitions(graph, query, 4) == (1 if one else 4), sink
    # One keyed operator is enough for the query's keys to spread, whatever else it holds.
    both = compile_text(
        CDR + "INSERT INTO per_caller SELECT idcaller, count(*) AS n FROM cdr WINDOW TIME SIZE 1 HOUR "
        "GROUP BY idcaller OUTPUT EVERY 3 EVENTS;"
    )
    (query,) = [q for q in plan_queries(both, ["per_caller"], {"cdr": "file:/in/cdr"}, {}) if q.stateful]
    assert len(query.stateful) == 2
    assert state_partitions(both, query, 3) == 3
    assert state_partitions(both, None, 3) == 3  # a query not planned: its operators unknown


SCRIPT = CDR + "\n".join(STATEMENTS[s][0] for s in ("unanswered", "totals", "bursts"))
SINKS = ["unanswered", "totals", "bursts"]
RESTART = at(hours=3)  # the first run reads the events before it


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# each sink's query: the two patterns over `cdr` share one, whose keys spread (`bursts` is keyed)
QUERIES = {"patterns:cdr": False, "sink:totals": True}


def _partitions(checkpoint: Path, query: str) -> tuple[set[str], set[int]]:
    """The state partitions of a query: what its micro-batches' offsets recorded, and the
    partitions of its stateful operators' state directories."""
    q = checkpoint / query_dir(query)
    recorded = {
        json.loads(f.read_text().splitlines()[1])["conf"]["spark.sql.shuffle.partitions"]
        for f in (q / "offsets").iterdir()
        if f.name.isdigit()
    }
    on_disk = {int(p.name) for p in (q / "state").glob("*/*") if p.name.isdigit()}
    return recorded, on_disk


@pytest.mark.spark
def test_new_checkpoints_get_one_partition_and_earlier_ones_resume_with_theirs(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    rows = cdrs(700, seed=21, mean_gap_s=20, callers=12)
    files = split_by_time(rows, "timestamp", [at(hours=1.5), RESTART])
    assert len(files) == 3
    graph = compile_text(SCRIPT)

    # A checkpoint made before this layout: every stateful query with the session's partitions.
    sources = prepare(tmp_path / "earlier", {"cdr": files[:2]})
    earlier = tmp_path / "earlier" / "ck"
    with monkeypatch.context() as patch:
        patch.setattr(starting, "state_partitions", lambda graph, query, keyed: keyed)
        run_spark(spark, graph, tmp_path / "earlier", sources, SINKS, checkpoint=earlier)
    first = {s: read_jsonl(tmp_path / "earlier" / "spark-out", f"{s}-") for s in SINKS}
    assert all(first.values()), first  # each query had rows, so each had state, before the restart
    write_files(tmp_path / "earlier" / "in" / "cdr", files[2:])
    resumed = run_spark(spark, graph, tmp_path / "earlier", sources, SINKS, checkpoint=earlier)

    # A new checkpoint over the same input.
    fresh = tmp_path / "fresh" / "ck"
    new = run_spark(
        spark, graph, tmp_path / "fresh", prepare(tmp_path / "fresh", {"cdr": files}), SINKS, checkpoint=fresh
    )

    for query, one in QUERIES.items():
        assert _partitions(earlier, query) == ({"2"}, {0, 1}), query
        assert _partitions(fresh, query) == (({"1"}, {0}) if one else ({"2"}, {0, 1})), query

    ref = run_reference(graph, tmp_path / "ref", prepare(tmp_path / "ref", {"cdr": files}), SINKS)
    # matches open at the restart, which only the state carried across it completes
    for sink in ("unanswered", "bursts"):
        spanning = [r for r in ref[sink] if _time(r["t1"]) < _time(RESTART) <= _time(r["t"])]
        assert len(spanning) >= 3, f"{sink}: {len(spanning)} matches span the restart"
    for out in (resumed, new):
        assert_same(ref, out, "unanswered", min_rows=10, ordered=True)
        assert_same(ref, out, "totals", min_rows=5, ordered=True)
        assert_same(ref, out, "bursts", min_rows=10)
        assert out.dead == []
    # the resumed run appended to what the first wrote
    for sink in SINKS:
        assert resumed[sink][: len(first[sink])] == first[sink], sink
