"""Redis Stream sources and sinks (deployer/connectors/redis_stream.py) against a real Redis, both engines."""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from cpl.compiler import compile_script
from deployer.connectors.records import RecordError, to_event
from deployer.connectors.redis_stream import (
    RedisStreamError,
    RedisStreamInput,
    RedisStreamWriter,
    entry_text,
    id_ranges,
    is_redis_stream_uri,
    marker_key,
    parse_id,
    parse_stream_uri,
    seq_of,
)
from deployer.local import driver as local_engine
from deployer.spark.run import deployment as spark_run
from deployer.spark.streams.redis_sink import redis_stream_writer
from deployer.spark.streams.redis_source import redis_stream_source
from deployer.spark.streams.sources import sequence
from stores.errors import StoreConfigError

SCRIPT = """
CREATE STREAMSCHEMA calls WITH caller integer, duration integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO long_calls SELECT caller, duration * 2 AS d2, ts FROM calls WHERE duration >= 10;
"""
GRAPH = compile_script(SCRIPT).graph
CALLS_SOURCE = GRAPH.sources()[0]
CALLS = CALLS_SOURCE.schema
OUT_NAMES = GRAPH.stream_schema("long_calls").names


def with_stream(url: str, key: str, **options: Any) -> str:
    query = "&".join([f"stream={key}", *(f"{k}={v}" for k, v in options.items())])
    return f"{url}{'&' if '?' in url else '?'}{query}"


def call(caller: int, duration: Any, second: int) -> dict[Any, Any]:
    return {
        "data": json.dumps({"caller": caller, "duration": duration, "ts": f"2026-01-01T00:00:{second:02d}Z"})
    }


def xrange_data(client: redis.Redis, key: str) -> list[dict[str, Any]]:
    entries: Any = client.xrange(key)
    return [json.loads(f[b"data"]) for _, f in entries]


def lines_in(directory: Path, prefix: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in sorted(directory.glob(f"{prefix}*.jsonl")):
        out += [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    return out


# ---- no server ---------------------------------------------------------------------------------------------


def test_uri_parsing_and_redaction(tmp_path: Path) -> None:
    s = parse_stream_uri("rediss://app:s3cr%40t@cache.example:6380/2?stream=cdr%3Ain&maxRecordsPerBatch=500")
    assert (s.key, s.max_records, s.start, s.block_ms) == ("cdr:in", 500, "0", 1000)
    assert s.url.tls and s.url.password == "s3cr@t" and s.url.database == "2" and s.url.username == "app"
    for shown in (str(s), repr(s), s.redacted()):
        assert "s3cr" not in shown and "***" in shown and "stream=cdr%3Ain" in shown
    assert parse_stream_uri("redis://h/0?stream=k&start=$").start == "$"
    assert parse_stream_uri("redis://h/0?stream=k&start=1700000000000").start == "1700000000000-0"
    pw = tmp_path / "pw"
    pw.write_text("from-file\n")
    pw.chmod(0o600)
    assert parse_stream_uri(f"redis://h:1/0?stream=k&password_file={pw}").url.password == "from-file"
    assert is_redis_stream_uri("REDIS://h/0?stream=k") and not is_redis_stream_uri("file:/tmp/x")
    with pytest.raises(RedisStreamError, match=r"add \?stream=KEY") as err:
        parse_stream_uri("redis://u:hunter2@h:1/0")
    assert "hunter2" not in str(err.value)
    with pytest.raises(StoreConfigError, match="unsupported redis option") as cfg:
        parse_stream_uri("redis://u:hunter2@h:1/0?stream=k&colour=blue")
    assert "hunter2" not in str(cfg.value)
    with pytest.raises(RedisStreamError, match="maxRecordsPerBatch must be a positive integer"):
        parse_stream_uri("redis://h/0?stream=k&maxRecordsPerBatch=0")
    with pytest.raises(RedisStreamError, match="start must be 0, \\$ or an entry id"):
        parse_stream_uri("redis://h/0?stream=k&start=yesterday")


def test_entry_ids_seq_and_text() -> None:
    # __seq sorts like the ids, numerically, not like their text ("9-0" < "10-0").
    ids = ["9-0", "10-0", "10-2", "10-11", "1700000000000-0"]
    assert sorted(ids, key=lambda i: seq_of("k", i)) == ids
    assert sorted(ids, key=lambda i: seq_of("k", i)) == sorted(ids, key=parse_id)
    assert entry_text({b"data": b'{"a": 1}'}) == '{"a": 1}'
    assert json.loads(entry_text({b"a": b"1", b"b": b"x"})) == {"a": "1", "b": "x"}
    assert json.loads(entry_text({b"data": b"1", b"b": b"x"})) == {"data": "1", "b": "x"}


@pytest.mark.parametrize(
    ("after", "upto", "parts"), [("0-0", "5-3", 2), ("7-1", "7-9", 4), ("1-5", "400-0", 3)]
)
def test_id_ranges_tile_the_interval(after: str, upto: str, parts: int) -> None:
    ranges = id_ranges(after, upto, parts)
    assert 1 <= len(ranges) <= parts
    nums = [(parse_id(a), parse_id(b)) for a, b in ranges]
    # Contiguous and exact: each range starts right after the previous one ends.
    ints = [((a[0] << 64) | a[1], (b[0] << 64) | b[1]) for a, b in nums]
    lo, hi = parse_id(after), parse_id(upto)
    assert ints[0][0] == ((lo[0] << 64) | lo[1]) + 1 and ints[-1][1] == (hi[0] << 64) | hi[1]
    assert all(x[1] + 1 == y[0] for x, y in itertools.pairwise(ints))
    assert id_ranges(upto, upto, parts) == []


# ---- local engine ------------------------------------------------------------------------------------------


@pytest.mark.redis
def test_local_source_and_sink_round_trip(redis_db: str) -> None:
    client = redis.Redis.from_url(redis_db)
    client.xadd("calls", call(1, 30, 0))
    client.xadd("calls", {"data": "{not json"})
    client.xadd("calls", {"caller": "2", "duration": "12", "ts": "2026-01-01T00:00:02Z"})  # field per column
    client.xadd("calls", call(3, "abc", 3))

    source = RedisStreamInput("calls", with_stream(redis_db, "calls", block_ms=200))
    sink = RedisStreamWriter(with_stream(redis_db, "out"))
    rejected: list[tuple[str | None, str]] = []
    try:
        batch = source.next_batch()
        assert batch is not None
        for rec in batch:
            if rec.fields is None:
                rejected.append((rec.error, rec.source))
                continue
            try:
                event = to_event(rec.fields, CALLS)
            except RecordError as err:
                rejected.append((str(err), rec.source))
                continue
            sink.write(json.dumps({"caller": event[0]}))
        sink.flush()
        assert xrange_data(client, "out") == [{"caller": 1}, {"caller": 2}]
        assert [r for r, _ in rejected] == [
            "malformed JSON: Expecting property name enclosed in double quotes at column 2",
            "field 'duration': 'abc' is not an integer",
        ]
        assert all("?stream=calls entry " in src for _, src in rejected)

        # Idle: nothing now, and `wait` gives up after block_ms; --until-idle would stop here.
        assert source.next_batch() is None
        t0 = time.monotonic()
        assert source.wait() is False
        assert 0.15 <= time.monotonic() - t0 < 2.0

        # A new entry wakes a waiting reader; only the new one is read.
        client.xadd("calls", call(4, 40, 4))
        assert source.wait() is True
        batch = source.next_batch()
        assert batch is not None
        assert [to_event(r.fields or {}, CALLS)[0] for r in batch] == [4]
        assert source.next_batch() is None
    finally:
        source.close()
        sink.close()

    # start=$ skips what is already there.
    late = RedisStreamInput("calls", with_stream(redis_db, "calls", start="$", block_ms=100))
    try:
        assert late.next_batch() is None
        client.xadd("calls", call(5, 50, 5))
        batch = late.next_batch()
        assert batch is not None and [to_event(r.fields or {}, CALLS)[0] for r in batch] == [5]
    finally:
        late.close()


@pytest.fixture
def secret_url(redis_db: str) -> Iterator[tuple[str, str]]:
    """(URL of `redis_db` as a user of its own with a password, that password); the user is removed
    afterwards. An ACL user rather than requirepass: the server is shared by the whole test run."""
    client = redis.Redis.from_url(redis_db)
    user, password = f"cep_{secrets.token_hex(4)}", f"Pw-{secrets.token_hex(10)}"
    client.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["~*"], commands=["+@all"])
    yield redis_db.replace("redis://", f"redis://{user}:{password}@", 1), password
    client.acl_deluser(user)


@pytest.mark.redis
def test_local_sink_buffers_until_flush_and_password_is_never_shown(
    redis_db: str, secret_url: tuple[str, str]
) -> None:
    client = redis.Redis.from_url(redis_db)
    base, password = secret_url
    sink = RedisStreamWriter(with_stream(base, "out"), flush_every=3)
    sink.write('{"n": 1}')
    sink.write('{"n": 2}')
    assert client.xlen("out") == 0  # buffered
    sink.write('{"n": 3}')  # flush_every reached
    assert client.xlen("out") == 3
    sink.write('{"n": 4}')
    sink.close()
    assert [d["n"] for d in xrange_data(client, "out")] == [1, 2, 3, 4]

    wrong = RedisStreamInput("calls", with_stream(base.replace(password, "nope" + password), "calls"))
    with pytest.raises(RedisStreamError) as err:
        wrong.next_batch()
    assert password not in str(err.value) and "***" in str(err.value)
    assert password not in repr(wrong.source)


@pytest.mark.redis
@pytest.mark.skipif(
    not hasattr(local_engine, "REDIS_SCHEMES"), reason="deployer/local/driver.py does not know redis:// yet"
)
def test_run_local_from_and_to_redis_streams(redis_db: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_db)
    client.xadd("calls", call(1, 30, 1))
    client.xadd("calls", {"data": "[1, 2]"})
    client.xadd("calls", call(2, 20, 2))
    client.xadd("calls", call(3, 5, 3))
    t0 = time.monotonic()
    stats = local_engine.run_local(
        GRAPH,
        sources={"calls": with_stream(redis_db, "calls", block_ms=300)},
        sinks={"long_calls": with_stream(redis_db, "long")},
        dead_letter=f"file:{tmp_path / 'dead'}",
        until_idle=True,
    )
    assert 0.3 <= time.monotonic() - t0 < 10  # ended after one idle block_ms
    assert xrange_data(client, "long") == [
        {"caller": 1, "d2": 60, "ts": "2026-01-01T00:00:01Z"},
        {"caller": 2, "d2": 40, "ts": "2026-01-01T00:00:02Z"},
    ]
    [dead] = lines_in(tmp_path / "dead", "dead-letter-")
    assert dead["reason"] == "a record must be a JSON object, not list" and dead["record"] == "[1, 2]"
    assert "?stream=calls entry " in dead["source"]
    assert stats is not None

    # Watching (no until_idle): new entries are picked up as they come, until `stop` is set.
    stop = threading.Event()
    watcher = threading.Thread(
        target=local_engine.run_local,
        args=(GRAPH, {"calls": with_stream(redis_db, "calls", start="$", block_ms=100)}),
        kwargs={"sinks": {"long_calls": with_stream(redis_db, "watched")}, "until_idle": False, "stop": stop},
    )
    watcher.start()
    try:
        time.sleep(0.5)
        client.xadd("calls", call(7, 70, 7))
        client.xadd("calls", call(8, 80, 8))  # moves the watermark past 7: 7 is released
        deadline = time.monotonic() + 10
        while client.xlen("watched") == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [d["caller"] for d in xrange_data(client, "watched")] == [7]
    finally:
        stop.set()
        watcher.join(10)
    assert not watcher.is_alive()
    assert [d["caller"] for d in xrange_data(client, "watched")] == [7, 8]  # the rest at the end


# ---- Spark -------------------------------------------------------------------------------------------------


@pytest.fixture
def spark_wired(spark: Any) -> Any:
    """The session, for the tests that run SparkDeployments reading redis:// sources."""
    return spark


def _deploy(spark: Any, source: str, tmp_path: Path) -> Any:
    from deployer.spark.run.deployment import SparkDeployment

    return SparkDeployment(
        spark,
        GRAPH,
        sources={"calls": source},
        sinks={"long_calls": f"file:{tmp_path / 'out'}"},
        checkpoint=str(tmp_path / "ck"),
        dead_letter=f"file:{tmp_path / 'dead'}",
        until_idle=True,
        name="redis-test",
    )


@pytest.mark.spark
@pytest.mark.redis
@pytest.mark.slow
def test_spark_source_events_rejects_and_restart(spark_wired: Any, redis_db: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_db)
    client.xadd("calls", call(1, 30, 0))
    client.xadd("calls", {"data": "{not json"})
    client.xadd("calls", {"caller": "2", "duration": "12", "ts": "2026-01-01T00:00:02Z"})
    client.xadd("calls", call(3, 5, 3))  # filtered out by the script
    client.xadd("calls", call(4, "abc", 4))
    uri = with_stream(redis_db, "calls")

    _deploy(spark_wired, uri, tmp_path).run()
    first = lines_in(tmp_path / "out", "long_calls-")
    assert first == [
        {"caller": 1, "d2": 60, "ts": "2026-01-01T00:00:00Z"},
        {"caller": 2, "d2": 24, "ts": "2026-01-01T00:00:02Z"},
    ]
    dead = sorted(lines_in(tmp_path / "dead", "dead-letter-"), key=lambda d: d["source"])
    assert [(d["stream"], d["reason"], d["record"]) for d in dead] == [
        (
            "calls",
            "malformed JSON: Expecting property name enclosed in double quotes at column 2",
            "{not json",
        ),
        ("calls", "field 'duration': 'abc' is not an integer", call(4, "abc", 4)["data"]),
    ]
    assert all("?stream=calls entry " in d["source"] for d in dead)

    # Restart on the same checkpoint with new entries: only those are processed.
    client.xadd("calls", call(5, 50, 5))
    client.xadd("calls", call(6, 60, 6))
    _deploy(spark_wired, uri, tmp_path).run()
    assert lines_in(tmp_path / "out", "long_calls-") == [
        *first,
        {"caller": 5, "d2": 100, "ts": "2026-01-01T00:00:05Z"},
        {"caller": 6, "d2": 120, "ts": "2026-01-01T00:00:06Z"},
    ]
    assert len(lines_in(tmp_path / "dead", "dead-letter-")) == 2


@pytest.mark.spark
@pytest.mark.redis
def test_spark_sink_skips_a_replayed_batch(spark: Any, redis_db: str) -> None:
    client = redis.Redis.from_url(redis_db)
    write = redis_stream_writer(with_stream(redis_db, "out"), "long_calls", ("caller", "ts"), order=["ts"])
    schema = "caller int, ts timestamp"

    def batch(*rows: tuple[int, str]) -> Any:
        return spark.createDataFrame([(c, datetime.fromisoformat(t)) for c, t in rows], schema)

    written = [
        write(batch((2, "2026-01-01T00:00:02+00:00"), (1, "2026-01-01T00:00:01+00:00")), 0),  # sorted by ts
        write(batch((5, "2026-01-01T00:00:05+00:00")), 1),
        write(batch((5, "2026-01-01T00:00:05+00:00")), 1),  # replay of batch 1
        write(batch((1, "2026-01-01T00:00:01+00:00")), 0),  # an older one
        write(batch(), 2),
    ]
    assert written == [2, 1, 0, 0, 0]  # the entries each call added: the run's rows out
    assert xrange_data(client, "out") == [
        {"caller": 1, "ts": "2026-01-01T00:00:01Z"},
        {"caller": 2, "ts": "2026-01-01T00:00:02Z"},
        {"caller": 5, "ts": "2026-01-01T00:00:05Z"},
    ]
    # Outside a streaming query there is no query id: the writer is known by its stream name.
    assert client.hgetall(marker_key("out")) == {b"long_calls": b"2"}


@pytest.mark.spark
@pytest.mark.redis
@pytest.mark.slow
def test_spark_sink_exactly_once_across_a_crash_before_commit(
    spark: Any, redis_db: str, secret_url: tuple[str, str], tmp_path: Path
) -> None:
    """Spark re-runs the last batch when its commit is missing from the checkpoint (a crash after the
    sink wrote, before Spark committed): Redis must hold each row once. Through a password-protected
    user, which must not show in the query's progress reports."""
    client = redis.Redis.from_url(redis_db)
    base, password = secret_url
    for i in (1, 0, 3, 2):  # arrival order is not event-time order (within the stream's WATERMARK)
        client.xadd("in", call(i, 10 + i, i))
    calls = compile_script(
        SCRIPT.replace("TIMESTAMP BY ts", "TIMESTAMP BY ts WATERMARK 10 SECONDS")
    ).graph.sources()[0]
    timed, _ = redis_stream_source(spark, with_stream(base, "in", maxRecordsPerBatch=2), calls)
    good = sequence({calls.stream: (calls, timed)}, [])[calls.stream]  # as inputs.read_inputs does
    sink = redis_stream_writer(with_stream(base, "out"), "long_calls", CALLS.names, order=["_2", "__seq"])

    def run() -> str:
        q = (
            good.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        assert password not in json.dumps(q.recentProgress, default=str)
        return str(q.id)

    query_id = run()
    # in event-time order: held until the watermark passed them, or the input ended (the last batch)
    assert [d["caller"] for d in xrange_data(client, "out")] == [0, 1, 2, 3]
    commits = sorted((tmp_path / "ck" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    # two batches of two entries (and, the watermark having moved, maybe a batch without data)
    assert [p.name for p in commits][:2] == ["0", "1"]
    for p in commits[1:]:  # "crash": batch 1 wrote to Redis but was never committed
        p.unlink()
        (p.parent / f".{p.name}.crc").unlink(missing_ok=True)
    client.xadd("in", call(9, 99, 9))
    assert run() == query_id
    assert [d["caller"] for d in xrange_data(client, "out")] == [0, 1, 2, 3, 9]
    last = max(int(p.name) for p in (tmp_path / "ck" / "commits").glob("[0-9]*"))
    assert client.hgetall(marker_key("out")) == {f"long_calls@{query_id}".encode(): str(last).encode()}


@pytest.mark.spark
@pytest.mark.redis
def test_spark_plan_hides_the_password(
    spark: Any, secret_url: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, password = secret_url
    good, bad = redis_stream_source(spark, with_stream(base, "calls"), CALLS_SOURCE)
    good.explain(extended=True)
    bad.explain(extended=True)
    shown = capsys.readouterr().out
    # The options are in the plan; Spark redacts the one named `password`.
    assert "cep_redis_stream" in shown and "password=*********(redacted)" in shown
    assert password not in shown


@pytest.mark.spark
@pytest.mark.redis
@pytest.mark.slow
def test_spark_deployment_from_and_to_redis_streams(spark: Any, redis_db: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_db)
    for i in (1, 2, 3):  # in order: the stream has no WATERMARK, an earlier event would be late
        client.xadd("calls", call(i, 10 * i, i))

    def deploy() -> int:
        return (
            spark_run.SparkDeployment(
                spark,
                GRAPH,
                sources={"calls": with_stream(redis_db, "calls")},
                sinks={"long_calls": with_stream(redis_db, "long")},
                checkpoint=str(tmp_path / "ck"),
                dead_letter=f"file:{tmp_path / 'dead'}",
                until_idle=True,
            )
            .run()
            .rows_out
        )

    assert deploy() == 3  # the rows out are the entries the sink added (none counted before)
    assert [d["caller"] for d in xrange_data(client, "long")] == [1, 2, 3]
    client.xadd("calls", call(4, 40, 4))
    assert deploy() == 1
    assert [d["caller"] for d in xrange_data(client, "long")] == [1, 2, 3, 4]
