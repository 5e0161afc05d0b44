"""Scenario 10: poison events are dead-lettered exactly once, with their reason; the rest applies.

Three input files mix good events with every kind of poison a producer can send: malformed JSON,
JSON that is not an object or that Python refuses (a 10 MB number, nesting 100,000 deep), values of
the wrong type, missing fields, a 10 MB string where a number belongs, a NUL character (which
Postgres text cannot hold; Redis can), NULL where a table or an UpdateSQL target has NOT NULL, a
value too large for a Postgres index, and a division by zero. Each event is routed by its `kind` to one failure point: a Materialize into
Postgres, a Materialize into Redis hashes, an UpdateSQL (`INSERT INTO audit ... ON SQL`), or all
three (`kind = 'all'`, which carries a 10 MB text field: accepted and stored byte for byte
everywhere, a deliberate decision, docs/guarantees.md).

`cep run` runs the script on Spark (two micro-batches) and on the reference executor, each into
stores of its own. Both must dead-letter exactly the expected records and events, each once, with
the field and value or the database's message, and store exactly the same good rows, which are
the rows the input says. Then the Spark run is made to replay its last micro-batch in every query
(its commits deleted, as after a crash before the commit): the replay reads the batch again, and
must write nothing twice and dead-letter nothing again (the dead-letter files stay byte for byte).
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from run_helpers import cep_run, dead_letters, files_of, redis_hashes, replay_last_batch, with_db

from cpl.compiler import compile_script
from operators import graph as g

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres, pytest.mark.redis]

SCRIPT = """
CREATE STREAMSCHEMA ev WITH id integer, kind varchar(8), note varchar, qty integer, per integer;
CREATE DATASTORE pg TYPE postgresql;
CREATE DATASTORE kv TYPE redis;
CREATE SQLQUERY audit ON pg AS 'INSERT INTO audit (id, note, unit) VALUES (?, ?, ?)';
CREATE TABLE items (id integer PRIMARY KEY, note varchar, unit double) IN pg;
CREATE TABLE items_kv (id integer PRIMARY KEY, note varchar, unit double) IN kv;
INSERT INTO priced SELECT id, kind, note, qty / per AS unit FROM ev;
INSERT INTO TABLE items SELECT id, note, unit FROM priced WHERE kind IN ('pg', 'all');
INSERT INTO TABLE items_kv SELECT id, note, unit FROM priced WHERE kind IN ('kv', 'all');
INSERT INTO audited SELECT id, note, unit, a.n AS n FROM priced WHERE kind IN ('sql', 'all')
  ON SQL audit, a, id, note, unit, n;
"""
AUDIT_TABLE = "CREATE TABLE audit (id integer PRIMARY KEY, note text NOT NULL, unit double precision)"
# A btree index entry holds at most ~2.7 kB: a longer note of an event with id >= 100 is refused.
AUDIT_INDEX = "CREATE INDEX audit_note ON audit (note) WHERE id >= 100"

MB10 = 10 * 1024 * 1024
# 10 MB of text with multi-byte characters (2, 3 and 4 bytes in UTF-8) and a right-to-left script
BIG_TEXT = ("0123456789 abcdef é€😀 שלום " * (MB10 // 20 + 1))[:MB10]
NUL = "nul\x00here"
UNINDEXABLE = random.Random(10).randbytes(10_000).hex()  # 20 kB that do not compress


def ev(i: int | None, kind: str, note: str | None = "n", qty: int = 10, per: int = 4) -> str:
    return json.dumps({"id": i, "kind": kind, "note": note, "qty": qty, "per": per}, ensure_ascii=False)


# Expected dead letters: key -> (stage, failure point, text the reason must hold). The key of an
# input record is its text's first 60 characters; of an event, its id (or note when id is NULL).
# The failure points are the Map (`map`), the two tables and the UpdateSQL (`audit`).
NESTED = "[" * 100_000 + "]" * 100_000
MALFORMED = '{"id": 100, "kind": "pg", '
NOT_INT = json.dumps({"id": 104, "kind": "pg", "note": "x", "qty": "abc", "per": 1})
NOT_INT_BOOL = json.dumps({"id": 105, "kind": "pg", "note": "x", "qty": 1, "per": True})
NOT_TEXT = json.dumps({"id": 106, "kind": "kv", "note": {"a": 1}, "qty": 1, "per": 1})
TOO_LONG = json.dumps({"id": 107, "kind": "toolongkind", "note": "x", "qty": 1, "per": 1})
MISSING = json.dumps({"id": 108, "kind": "kv", "note": "x", "qty": 1})
BIG_NUMBER = '{"id": 110, "kind": "pg", "note": "x", "qty": ' + "9" * MB10 + ', "per": 1}'
BIG_STRING = json.dumps({"id": 114, "kind": "pg", "note": "x", "qty": 1, "per": "7" * MB10})

FILES = [
    [
        ev(1, "pg"),
        ev(2, "kv"),
        ev(3, "sql", "audit's text"),
        ev(4, "all"),
        MALFORMED,
        ev(101, "pg", per=0),
        ev(102, "pg", NUL),
        ev(5, "kv", NUL),  # Redis hashes hold any bytes: stored as it is
        ev(103, "sql", NUL),
        "",  # a blank line is no record
        ev(6, "pg", qty=7),
        ev(7, "none"),  # no WHERE keeps it: filtered, not dead-lettered
    ],
    [
        ev(8, "kv"),
        ev(9, "sql", qty=1),
        NOT_INT_BOOL,
        NOT_TEXT,
        TOO_LONG,
        MISSING,
        ev(None, "pg", "null-pg"),
        ev(109, "sql", None),
        ev(115, "sql", UNINDEXABLE),
        NESTED,
        ev(10, "pg"),
        ev(11, "all", "all's text"),
        ev(12, "all", BIG_TEXT),
        BIG_NUMBER,
        BIG_STRING,
    ],
    [  # Spark's batch 1, the one replayed: poison for every failure point
        ev(13, "sql"),
        NOT_INT,
        ev(14, "kv"),
        ev(111, "kv", per=0),
        ev(112, "pg", NUL + "2"),
        ev(None, "kv", "null-kv"),
        ev(113, "sql", None),
        "[1, 2]",
    ],
]

EXPECTED: dict[Any, tuple[str, str, str]] = {
    MALFORMED[:60]: ("input", "input", "malformed JSON: Expecting property name enclosed in double quotes"),
    101: ("Map", "map", "division by zero"),
    102: ("Materialize", "items", "table items: PostgreSQL text fields cannot contain NUL (0x00) bytes"),
    103: ("UpdateSQL", "audit", "query audit: PostgreSQL text fields cannot contain NUL (0x00) bytes"),
    NOT_INT[:60]: ("input", "input", "field 'qty': 'abc' is not an integer"),
    NOT_INT_BOOL[:60]: ("input", "input", "field 'per': true is not an integer"),
    NOT_TEXT[:60]: ("input", "input", "field 'note': a JSON dict is not text"),
    TOO_LONG[:60]: ("input", "input", "field 'kind': 'toolongkind' is longer than 8 characters"),
    MISSING[:60]: ("input", "input", "missing field 'per'"),
    "null-pg": ("Materialize", "items", 'null value in column "id" of relation "items" violates not-null'),
    "null-kv": ("Materialize", "items_kv", "table items_kv: NULL in primary key ['id']"),
    109: ("UpdateSQL", "audit", 'null value in column "note" of relation "audit" violates not-null'),
    115: ("UpdateSQL", "audit", "index row requires 20016 bytes, maximum size is 8191"),
    "[1, 2]": ("input", "input", "a record must be a JSON object, not list"),
    NESTED[:60]: ("input", "input", "unreadable JSON: nested too deeply"),
    BIG_NUMBER[:60]: (
        "input",
        "input",
        "unreadable JSON: Exceeds the limit (4300 digits) for integer string",
    ),
    BIG_STRING[:60]: (
        "input",
        "input",
        f"field 'per': '{'7' * 100}'... ({MB10} characters) is not an integer",
    ),
    111: ("Map", "map", "division by zero"),
    112: ("Materialize", "items", "table items: PostgreSQL text fields cannot contain NUL (0x00) bytes"),
    113: ("UpdateSQL", "audit", 'null value in column "note" of relation "audit" violates not-null'),
}


# The poison of the last file, Spark's batch 1: what a replay of that batch finds again.
BATCH1 = {NOT_INT[:60], 111, 112, "null-kv", 113, "[1, 2]"}


def dead_letters_of(f: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in f.read_text(encoding="utf-8").split("\n") if line]


def write_inputs(directory: Path) -> None:
    """The files, renamed into place whole, with increasing modification times (Spark's file source
    takes them in that order: files 0 and 1 make batch 0, file 2 batch 1)."""
    directory.mkdir(parents=True)
    mtime = time.time() - 600
    for i, lines in enumerate(FILES):
        tmp = directory / f".part-{i}.tmp"
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        mtime += 10
        os.utime(tmp, (mtime, mtime))
        tmp.rename(directory / f"part-{i}.jsonl")


def good_events() -> list[dict[str, Any]]:
    """The events no poison touches, as the input says them."""
    out = []
    for lines in FILES:
        for line in lines:
            try:
                e = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(e, dict) and isinstance(e.get("id"), int) and e["id"] < 100 and e["kind"] != "none":
                out.append(e)
    return out


def key_of(d: dict[str, Any]) -> Any:
    if d["stage"] == "input":
        return d["record"][:60]
    event = d["event"]
    if event[0] is not None:
        return event[0]
    return next(v for v in event if isinstance(v, str) and v.startswith("null-"))


def comparable(d: dict[str, Any]) -> tuple[Any, ...]:
    """A dead letter without what differs between runs: where the record was read (Spark numbers
    the records of a large file per block) and the URL of the run's own stores."""
    reason = re.sub(r"\((postgresql|redis)://[^)]*\)", "(URL)", d["reason"])
    return (d["stage"], d.get("node"), d.get("line"), reason, d.get("record"), json.dumps(d.get("event")))


def pg_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {
            "items": conn.execute("SELECT id, note, unit FROM items ORDER BY id").fetchall(),
            "audit": conn.execute("SELECT id, note, unit FROM audit ORDER BY id").fetchall(),
            "ledger": conn.execute(
                "SELECT deployment, operator, key, affected, error FROM cep_ledger ORDER BY 1, 2, 3"
            ).fetchall()
            if conn.execute("SELECT to_regclass('cep_ledger')").fetchone() != (None,)
            else [],
        }


def sink_lines(directory: Path) -> list[str]:
    return sorted(
        line for f in sorted(directory.glob("*.jsonl")) for line in f.read_text("utf-8").split("\n") if line
    )


def test_poison_events_are_dead_lettered_once_and_the_rest_applies(
    pg_db: str, pg_reference_db: str, redis_db: str, tmp_path: Path
) -> None:
    began = time.monotonic()
    for url in (pg_db, pg_reference_db):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(AUDIT_TABLE)
            conn.execute(AUDIT_INDEX)
    redis_ref = with_db(redis_db, 1)
    with redis.Redis.from_url(redis_ref) as client:
        client.flushdb()
    script = tmp_path / "poison.cpl"
    script.write_text(SCRIPT, encoding="utf-8")
    graph = compile_script(SCRIPT).graph
    source = next(n.id for n in graph.nodes if isinstance(n, g.Source))
    nodes = {"map": next(n.id for n in graph.nodes if isinstance(n, g.Map) and n.inputs[0].node == source)}
    nodes |= {n.table.name: n.id for n in graph.nodes if isinstance(n, g.Materialize)}
    nodes["audit"] = next(n.id for n in graph.nodes if isinstance(n, g.UpdateSQL))
    write_inputs(tmp_path / "in")

    def args(pg: str, kv: str, name: str) -> list[str]:
        return [
            "--source", f"ev=file:{tmp_path / 'in'}", "--sink", f"audited=file:{tmp_path / name / 'out'}",
            "--store", f"pg={pg}", "--store", f"kv={kv}", "--dead-letter", f"file:{tmp_path / name / 'dead'}",
        ]  # fmt: skip

    checkpoint = tmp_path / "ck"
    spark_args = [*args(pg_db, redis_db, "spark"), "--max-files-per-trigger", "2"]
    with ThreadPoolExecutor(1) as pool:  # the reference runs while Spark starts
        reference = pool.submit(cep_run, script, "local", args(pg_reference_db, redis_ref, "ref"), tmp_path)
        spark = cep_run(script, "spark", spark_args, tmp_path, checkpoint=checkpoint)
        ref = reference.result()
    spark_seconds = time.monotonic() - began

    # -- every poison dead-lettered exactly once, where it failed, with its reason -----------------
    for engine, directory in (("local", tmp_path / "ref" / "dead"), ("spark", tmp_path / "spark" / "dead")):
        found = dead_letters(directory)
        keys = [key_of(d) for d in found]
        assert sorted(map(str, keys)) == sorted(map(str, EXPECTED)), f"{engine}: {keys}"
        for d in found:
            stage, point, reason = EXPECTED[key_of(d)]
            assert d["stage"] == stage, (engine, d)
            assert reason in d["reason"], (engine, d["reason"][:300])
            if point == "input":
                assert d["stream"] == "ev" and "source" in d and "event" not in d, (engine, d["reason"])
            else:
                assert d["node"] == nodes[point] and isinstance(d["line"], int), (engine, d)
            if stage in ("Materialize", "UpdateSQL") and point != "items_kv":
                assert d["reason"].startswith("store pg (postgresql://"), d["reason"][:200]
        # the record of a 10 MB field is kept whole; its reason quotes 100 characters of it
        big = next(d for d in found if key_of(d) == BIG_STRING[:60])
        assert big["record"] == BIG_STRING and len(big["reason"]) < 300
    ref_dead, spark_dead = dead_letters(tmp_path / "ref" / "dead"), dead_letters(tmp_path / "spark" / "dead")
    assert sorted(map(comparable, ref_dead)) == sorted(map(comparable, spark_dead))

    # -- the good rows: what the input says, equal on both engines, byte for byte -----------------
    good = good_events()
    want_items = [(e["id"], e["note"], e["qty"] / e["per"]) for e in good if e["kind"] in ("pg", "all")]
    want_audit = [(e["id"], e["note"], e["qty"] / e["per"]) for e in good if e["kind"] in ("sql", "all")]
    want_kv = {
        f"items_kv:{e['id']}".encode(): {b"id": str(e["id"]).encode(), b"note": e["note"].encode(),
                                         b"unit": repr(e["qty"] / e["per"]).encode()}
        for e in good if e["kind"] in ("kv", "all")
    }  # fmt: skip
    spark_pg, ref_pg = pg_rows(pg_db), pg_rows(pg_reference_db)
    for name, rows in (("spark", spark_pg), ("local", ref_pg)):
        assert rows["items"] == sorted(want_items), name
        assert rows["audit"] == sorted(want_audit), name
    assert [r for r in spark_pg["items"] if r[0] == 12] == [(12, BIG_TEXT, 2.5)]
    spark_kv, ref_kv = redis_hashes(redis_db, "items_kv:"), redis_hashes(redis_ref, "items_kv:")
    assert spark_kv == want_kv and ref_kv == want_kv
    assert spark_kv[b"items_kv:5"][b"note"] == NUL.encode() and len(spark_kv[b"items_kv:12"][b"note"]) > MB10
    assert sink_lines(tmp_path / "spark" / "out") == sink_lines(tmp_path / "ref" / "out")
    assert len(sink_lines(tmp_path / "spark" / "out")) == len(want_audit)

    # -- what the runs report --------------------------------------------------------------------
    records = sum(1 for lines in FILES for line in lines if line.strip())
    for run in (spark, ref):
        s = run.summary
        assert (s.events_in, s.dead, s.filtered, s.late) == (records, len(EXPECTED), 1, 0), s
        assert (s.applied, s.out) == (len(want_items) + len(want_kv), len(want_audit)), s

    # -- a replay of the last batch writes nothing twice and dead-letters nothing again ----------
    before = (
        files_of(tmp_path / "spark" / "dead"), files_of(tmp_path / "spark" / "out"), spark_pg,
        redis_hashes(redis_db, ""),
    )  # fmt: skip
    replayed = replay_last_batch(checkpoint)
    # every query's batch 1: the two tables' and the sink's, which writes the UpdateSQL's failures
    # too (deployer.spark.run.failures) and, the first query to read the source, its rejected records
    assert set(replayed) == {"table_items", "table_items_kv", "sink_audited"}, replayed
    assert set(replayed.values()) == {1}, replayed
    again = cep_run(script, "spark", spark_args, tmp_path, checkpoint=checkpoint)
    after = (
        files_of(tmp_path / "spark" / "dead"), files_of(tmp_path / "spark" / "out"), pg_rows(pg_db),
        redis_hashes(redis_db, ""),
    )  # fmt: skip
    assert after[0] == before[0], "the replay changed the dead letters"
    assert after[1:] == before[1:], "the replay changed what was written"
    # The replay did happen: it read the last file again and found its poison again, and wrote it
    # to the same dead-letter files (named by batch id) as the first time, so nothing was added.
    in_batch1 = [key_of(d) for f in sorted((tmp_path / "spark" / "dead").glob("*-00000001.jsonl"))
                 for d in dead_letters_of(f)]  # fmt: skip
    assert sorted(map(str, in_batch1)) == sorted(map(str, BATCH1))
    assert again.summary.events_in == len(FILES[2]), again.output[-2000:]
    assert again.summary.dead == len(BATCH1), again.summary
    print(f"first runs: {spark_seconds:.0f} s, then the replay; whole test {time.monotonic() - began:.0f} s")
