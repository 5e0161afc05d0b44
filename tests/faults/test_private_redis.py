"""PrivateRedis counts the writes in its append-only file, whichever layout the server's version
writes (Redis 6.2: one appendonly.aof; Redis >= 7: appendonlydir/ with a manifest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_helpers import PrivateRedis, aof_files, aof_writes


def _resp(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def test_the_log_of_redis_6_is_one_file(tmp_path: Path) -> None:
    (tmp_path / "appendonly.aof").write_bytes(
        _resp(b"SELECT", b"0") + _resp(b"MULTI") + _resp(b"HSET", b"t:1", b"f", b"v") + _resp(b"EXEC")
    )
    assert aof_files(tmp_path) == [tmp_path / "appendonly.aof"]
    assert aof_writes(tmp_path) == {b"t:1": 1}


def test_the_log_of_redis_7_is_the_manifest_s_parts_in_order(tmp_path: Path) -> None:
    parts = tmp_path / "appendonlydir"
    parts.mkdir()
    (parts / "appendonly.aof.manifest").write_text(
        "file appendonly.aof.2.base.rdb seq 2 type b\n"
        "file appendonly.aof.1.incr.aof seq 1 type h\n"  # a history part, being deleted
        "file appendonly.aof.10.incr.aof seq 10 type i\n"
        "file appendonly.aof.9.incr.aof seq 9 type i\n"
    )
    (parts / "appendonly.aof.2.base.rdb").write_bytes(b"REDIS0011\xfa")  # data, not commands
    (parts / "appendonly.aof.1.incr.aof").write_bytes(_resp(b"HSET", b"old", b"f", b"v"))
    (parts / "appendonly.aof.9.incr.aof").write_bytes(
        b"#TS:1700000000\r\n" + _resp(b"HSET", b"t:1", b"f", b"v")
    )
    (parts / "appendonly.aof.10.incr.aof").write_bytes(_resp(b"hset", b"t:1", b"f", b"w"))
    assert aof_files(tmp_path) == [parts / "appendonly.aof.9.incr.aof", parts / "appendonly.aof.10.incr.aof"]
    assert aof_writes(tmp_path) == {b"t:1": 2}


@pytest.mark.redis
def test_a_private_server_logs_the_writes_of_scripts_across_a_crash(tmp_path: Path) -> None:
    server = PrivateRedis(tmp_path / "redis", password="pw")
    server.start()
    try:
        client = server.client()
        with client.pipeline(transaction=True) as p:  # as the Redis store writes: MULTI, EVAL, EXEC
            p.eval(
                "redis.call('HSET', KEYS[1], 'f', '1'); redis.call('HSET', KEYS[2], 'f', '2')", 2, "a", "b"
            )
            p.hset("c", "f", "3")
            p.execute()
        server.kill()  # SIGKILL: what it acknowledged is in the file (appendfsync always)
        server.start()
        client = server.client()
        assert client.hgetall("a") == {b"f": b"1"}
        client.hset("a", "f", "4")
        assert server.writes() == {b"a": 2, b"b": 1, b"c": 1}
    finally:
        server.stop()
