"""Checkpoint and restart in the middle of open pattern matches: a run over files A, then a second
run with the same checkpoint after files B arrived, together write what the reference executor
computes over A + B. At the restart point many partition keys hold partial matches that took their
first step in A and complete in B, absence deadlines not yet passed (an event of B cancels them, or
the watermark of B passes them) and WITHIN expiries not yet reached; the automaton state carried in
Spark's state store (deployer.spark.patterns.processor) must lose, repeat and revive none of them.

- `bursts`: a partitioned EVERY pattern with a count and a WITHIN;
- `unanswered`: an unpartitioned EVERY pattern whose trailing absence's condition refers to e1;
- `silences`: a partitioned SEQUENCE with a trailing absence and a WITHIN.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    Outputs,
    Row,
    assert_same,
    assert_same_order_per_group,
    at,
    cdrs,
    compile_text,
    multiset,
    prepare,
    read_jsonl,
    run_reference,
    run_spark,
    split_by_time,
    write_files,
)

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, timestamp timestamp
  TIMESTAMP BY timestamp WATERMARK 1 MINUTE;
INSERT INTO bursts
  SELECT e1.idcaller AS c, e1.timestamp AS t1, count(e2.idreceiver) AS n, e2[last].idreceiver AS r,
         e3.duration AS d3, match_time() AS t
  FROM PATTERN EVERY e1=cdr[duration > 100] -> e2=cdr[idreceiver <> e1.idreceiver]<2:>
       -> e3=cdr[duration < 10] WITHIN 1 HOUR PARTITION BY idcaller;
INSERT INTO unanswered
  SELECT e1.idcaller AS c, e1.idreceiver AS r, e1.timestamp AS t1, match_time() AS t
  FROM PATTERN EVERY e1=cdr[duration >= 600] -> NOT cdr[idcaller = e1.idcaller AND duration > 100]
       FOR 20 MINUTES WITHIN 1 HOUR;
INSERT INTO silences
  SELECT e1.idcaller AS c, e1.timestamp AS t1, e2.idreceiver AS r2, match_time() AS t
  FROM SEQUENCE EVERY e1=cdr[duration >= 120], e2=cdr[idreceiver <> e1.idreceiver], NOT cdr FOR 10 MINUTES
       WITHIN 30 MINUTES PARTITION BY idcaller;
"""
STREAMS = ["bursts", "unanswered", "silences"]
RESTART = at(hours=3.5)  # A: the events before it, B: those at or after it


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _spanning(rows: list[Row]) -> list[Row]:
    """The matches whose first event is in A and whose match time (the completing event, or the
    deadline an absence held until) is in B: open at the restart."""
    return [r for r in rows if _time(r["t1"]) < _time(RESTART) <= _time(r["t"])]


def _cancelled_in_b(rows: list[Row]) -> int:
    """`unanswered`'s absences open at the restart that an event of B cancels: each e1 of A whose 20
    minutes run past the restart, with a call of its caller over 100 s in B within them."""
    restart = _time(RESTART)
    n = 0
    for i, e1 in enumerate(rows):
        t1 = _time(e1["timestamp"])
        if e1["duration"] < 600 or t1 >= restart or t1 + timedelta(minutes=20) <= restart:
            continue
        n += any(
            e["idcaller"] == e1["idcaller"]
            and e["duration"] > 100
            and restart <= _time(e["timestamp"]) < t1 + timedelta(minutes=20)
            for e in rows[i + 1 :]
        )
    return n


def _reference(script: str, tmp: Path, files: list[list[Row]]) -> Outputs:
    tmp.mkdir()
    return run_reference(compile_text(script), tmp, prepare(tmp, {"cdr": files}), STREAMS)


def test_restart_keeps_open_partial_matches(spark: Any, tmp_path: Path) -> None:
    # 60 callers, each calling about every 10 minutes: near the restart most keys have a match open
    rows = cdrs(2400, seed=12, mean_gap_s=10, callers=60)
    files = split_by_time(rows, "timestamp", [at(hours=1.75), RESTART, at(hours=5.25)])
    assert len(files) == 4
    first, second = files[:2], files[2:]
    graph = compile_text(SCRIPT)

    # The precondition: matches open across the restart, on every statement and on many keys.
    whole = _reference(SCRIPT, tmp_path / "ref-whole", files)
    for s in STREAMS:
        spanning = _spanning(whole[s])
        assert len(spanning) >= 5, f"{s}: only {len(spanning)} matches span the restart"
        assert len({r["c"] for r in spanning}) >= 5, f"{s}: the matches spanning the restart are of few keys"
    # ... WITHIN expiries after it that decide something: with a longer WITHIN, partials of A would
    # complete in B after their hour ran out
    longer = _reference(SCRIPT.replace("WITHIN 1 HOUR P", "WITHIN 3 HOURS P"), tmp_path / "ref-longer", files)
    expired = multiset(_spanning(longer["bursts"])) - multiset(_spanning(whole["bursts"]))
    assert sum(expired.values()) >= 5, "no WITHIN runs out after the restart"
    # ... and absences of A that an event of B cancels
    assert _cancelled_in_b(rows) >= 5, "no absence open at the restart is cancelled after it"
    alone = _reference(SCRIPT, tmp_path / "ref-first", first)

    sources = prepare(tmp_path, {"cdr": first})
    out, dead, checkpoint = tmp_path / "spark-out", tmp_path / "spark-dead", tmp_path / "checkpoint"
    run_spark(spark, graph, tmp_path, sources, STREAMS, checkpoint=checkpoint, out=out, dead=dead)
    after_first = {s: read_jsonl(out, f"{s}-") for s in STREAMS}
    for s in STREAMS:
        # the first run wrote what A alone gives, none of the matches still open at its end
        assert multiset(after_first[s]) == multiset(alone[s]), s
        assert not multiset(after_first[s]) & multiset(_spanning(whole[s])), s

    write_files(tmp_path / "in" / "cdr", second)
    spk = run_spark(spark, graph, tmp_path, sources, STREAMS, checkpoint=checkpoint, out=out, dead=dead)
    # The reference read A and B in one run, without a restart.
    ref = run_reference(graph, tmp_path, sources, STREAMS)
    assert {s: multiset(ref[s]) for s in STREAMS} == {s: multiset(whole[s]) for s in STREAMS}

    # Rows of one partition key come in the order they matched (an unpartitioned pattern has one
    # key); across keys, a match a timer completes comes in the micro-batch after the one whose
    # watermark passed its deadline, maybe after other keys' later matches.
    assert_same(ref, spk, "bursts", min_rows=100)
    assert_same_order_per_group(ref, spk, "bursts", ["c"])
    assert_same(ref, spk, "unanswered", min_rows=100, ordered=True)
    assert_same(ref, spk, "silences", min_rows=50)
    assert_same_order_per_group(ref, spk, "silences", ["c"])
    # The second run appended to what the first wrote; it did not write it again.
    for s in STREAMS:
        assert spk[s][: len(after_first[s])] == after_first[s]
    assert spk.dead == []
    assert ref.dead == []
