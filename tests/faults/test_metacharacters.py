"""Scenario 11: event values full of SQL and Redis metacharacters arrive byte for byte.

Every event carries one hostile text: quotes, backslashes, semicolons, comments, dollar quoting,
driver placeholders (`%s`, `?`, `$1`, `:name`), JSON and Lua-ish brackets, CRLF and other line
separators, glob characters, whitespace, NUL-free unicode (emoji with joiners, right-to-left text,
combining marks, a BOM), Redis commands (`FLUSHALL`), the COPY text format's own markers (`\\N`,
`\\.`), the Redis table key's own escapes (`%3A`, `:`) and long strings (100 KB, 1 MB).

The text goes, on Spark and on the reference executor, each into stores of its own:
- into Postgres by Materialize (`vals`, keyed by id: binary COPY into a staging table, then upsert);
- into Postgres as UpdateSQL parameters (`INSERT INTO notes ...`, whose output goes nowhere: the
  statements must run anyway);
- into Redis hashes by Materialize, once as a field of a row keyed by id, once as the key itself
  (`vals_kv:<text>`, with `%` and `:` percent-encoded);
- as a ReadSQL parameter (`SELECT id FROM lookup WHERE v = ?`, OUTER): it must match exactly the
  lookup row that holds the same text, or nothing — the lookup table also holds near-misses (a
  doubled quote, a trailing space, what a LIKE pattern would match).

Everything is read back and compared exactly with the input; a canary table and a canary key must
survive (nothing was executed as SQL or as a Redis command), and nothing is dead-lettered.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
import redis
from run_helpers import cep_run, dead_letters, redis_hashes, with_db

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres, pytest.mark.redis]

SCRIPT = """
CREATE STREAMSCHEMA s WITH id integer, v varchar;
CREATE DATASTORE pg TYPE postgresql;
CREATE DATASTORE kv TYPE redis;
CREATE SQLQUERY put ON pg AS 'INSERT INTO notes (id, v) VALUES (?, ?)';
CREATE SQLQUERY find ON pg AS 'SELECT id FROM lookup WHERE v = ?' RETURNS (found integer);
CREATE TABLE vals (id integer PRIMARY KEY, v varchar) IN pg;
CREATE TABLE vals_by_id (id integer PRIMARY KEY, v varchar) IN kv;
CREATE TABLE vals_kv (v varchar PRIMARY KEY, id integer) IN kv;
INSERT INTO TABLE vals SELECT id, v FROM s;
INSERT INTO TABLE vals_by_id SELECT id, v FROM s;
INSERT INTO TABLE vals_kv SELECT v, id FROM s;
INSERT INTO put_out SELECT id, v, p.n AS n FROM s ON SQL put, p, id, v, n;
INSERT INTO matched SELECT id, v, f.found AS found FROM s ON OUTER SQL find, f, v, found;
"""

MIXED = "'\";--/*$$%s?{}\r\n*\\ é😀ש]]"
VALUES: list[str] = [
    "'", "''", "a'b", '"', '""', "\\", "\\'", "\\\\", "'; DROP TABLE canary; --", "\"; DROP TABLE canary; --",
    "1; DELETE FROM vals", "-- comment", "/* open", "*/", "/* c */ x", ";", ";;", "$$", "$1", "$$; DROP TABLE canary; $$",
    "$tag$ x $tag$", "%s", "%(v)s", "%", "%%", "_", "a_c", "a%", "?", "??", "?::text", ":name", ":1", "{}", "{", "}",
    '{"a": [1, {"b": null}]}', "{{x}}", "${x}", "[", "]", "]]", "[[x]]", "]]--", "--[[ ]]", "\r\n", "a\r\nb", "\n",
    "\r", "\t", "a\tb\\c", " ", "   ", "  lead and trail  ", "*", "vals_kv:*", "?*[]^", "FLUSHALL", "flushall",
    "FLUSHDB\r\nFLUSHALL\r\n", "*1\r\n$8\r\nFLUSHALL\r\n", "DEL vals_by_id:1", "EVAL \"return redis.call('FLUSHALL')\" 0",
    "]]; redis.call('FLUSHALL') --[[", "redis.call('del', KEYS[1])", "%25", "%3A", "a:b", "::", ":", "vals_kv:x",
    "\\N", "\\.", "\\x00", "E'\\n'", "NULL", "null", "None", "true", "0", "-0", "1e400", "",
    "é", "e\u0301", "日本語", "😀", "👨\u200d👩\u200d👧 family", "שלום עולם", "مرحبا", "\u202eRTL override\u202c",
    "\u200b", "\ufeffBOM", "\u2028line\u2029para", "\u0085NEL", "ǅ ß İ \u0131",
    MIXED * 4000,  # ~100 KB
    ("0123456789" * 100_000),  # 1 MB
]  # fmt: skip
assert len(set(VALUES)) == len(VALUES)

# ReadSQL: half of the values are in the lookup table, with an id of their own; the near-misses
# must match nothing (ids >= 90000, never expected).
LOOKUP = {v: 1000 + i for i, v in enumerate(VALUES) if i % 2 == 0}
NEAR = [
    "a''b",
    "'' ",
    "abc",
    "a c",
    "aXc",
    "a%b",
    "%%%",
    "FLUSHALL ",
    "flushAll",
    "e\u0301 ",
    "\\\\\\",
    "\r",
    "??",
]
NEAR = [n for n in NEAR if n not in VALUES]


def test_metacharacters_arrive_byte_for_byte(
    pg_db: str, pg_reference_db: str, redis_db: str, tmp_path: Path
) -> None:
    began = time.monotonic()
    for url in (pg_db, pg_reference_db):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE canary (x integer)")
            conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, v text NOT NULL)")
            conn.execute("CREATE TABLE lookup (id integer PRIMARY KEY, v text NOT NULL)")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO lookup VALUES (%s, %s)", [(i, v) for v, i in LOOKUP.items()])
                cur.executemany(
                    "INSERT INTO lookup VALUES (%s, %s)", [(90000 + i, v) for i, v in enumerate(NEAR)]
                )
    redis_ref = with_db(redis_db, 1)
    for url in (redis_db, redis_ref):
        with redis.Redis.from_url(url) as client:
            client.flushdb()
            client.set("canary", "alive")
    (tmp_path / "in").mkdir()
    lines = [json.dumps({"id": i, "v": v}, ensure_ascii=False) for i, v in enumerate(VALUES)]
    (tmp_path / "in" / "values.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    script = tmp_path / "meta.cpl"
    script.write_text(SCRIPT, encoding="utf-8")

    def args(pg: str, kv: str, name: str) -> list[str]:
        return [
            "--source", f"s=file:{tmp_path / 'in'}", "--sink", f"matched=file:{tmp_path / name / 'out'}",
            "--store", f"pg={pg}", "--store", f"kv={kv}", "--dead-letter", f"file:{tmp_path / name / 'dead'}",
        ]  # fmt: skip

    with ThreadPoolExecutor(1) as pool:  # the reference runs while Spark starts
        reference = pool.submit(cep_run, script, "local", args(pg_reference_db, redis_ref, "ref"), tmp_path)
        spark = cep_run(script, "spark", args(pg_db, redis_db, "spark"), tmp_path, checkpoint=tmp_path / "ck")
        ref = reference.result()

    want = [(i, v) for i, v in enumerate(VALUES)]
    for engine, pg, kv, run in (
        ("spark", pg_db, redis_db, spark),
        ("local", pg_reference_db, redis_ref, ref),
    ):
        assert dead_letters(tmp_path / ("spark" if engine == "spark" else "ref") / "dead") == [], engine
        s = run.summary
        assert (s.events_in, s.dead, s.applied) == (len(VALUES), 0, 3 * len(VALUES)), (engine, s)
        with psycopg.connect(pg) as conn:
            # Postgres: Materialize and UpdateSQL parameters, byte for byte (text compared in Python)
            assert conn.execute("SELECT id, v FROM vals ORDER BY id").fetchall() == want, engine
            assert conn.execute("SELECT id, v FROM notes ORDER BY id").fetchall() == want, engine
            assert conn.execute("SELECT octet_length(v) FROM vals ORDER BY id").fetchall() == [
                (len(v.encode()),) for v in VALUES
            ], engine
            assert conn.execute("SELECT to_regclass('canary') IS NOT NULL").fetchone() == (True,), engine
        # Redis: the text as a field, and as (the encoded end of) the key
        by_id = redis_hashes(kv, "vals_by_id:")
        assert by_id == {
            f"vals_by_id:{i}".encode(): {b"id": str(i).encode(), b"v": v.encode()} for i, v in want
        }, engine
        by_text = redis_hashes(kv, "vals_kv:")
        assert by_text == {
            b"vals_kv:" + v.replace("%", "%25").replace(":", "%3A").encode(): {
                b"v": v.encode(),
                b"id": str(i).encode(),
            }
            for i, v in want
        }, engine
        with redis.Redis.from_url(kv) as client:
            assert client.get("canary") == b"alive", engine
            others = {k for k in client.scan_iter(count=1000) if not k.startswith((b"vals_", b"cep:ledger:"))}
            assert others == {b"canary"}, (engine, sorted(others)[:10])
        # ReadSQL: exactly the lookup row holding the same text, or nothing (OUTER: NULL)
        out_dir = tmp_path / ("spark" if engine == "spark" else "ref") / "out"
        # split on "\n" only: str.splitlines would also split at U+2028 and U+0085 inside values
        texts = [f.read_text("utf-8") for f in sorted(out_dir.glob("*.jsonl"))]
        matched = [json.loads(x) for t in texts for x in t.split("\n") if x]
        got = sorted((m["id"], m["v"], m["found"]) for m in matched)
        assert got == [(i, v, LOOKUP.get(v)) for i, v in want], engine
    print(f"{len(VALUES)} values; whole test {time.monotonic() - began:.0f} s")
