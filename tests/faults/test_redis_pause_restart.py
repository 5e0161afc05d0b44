"""Redis paused, frozen, and restarted while a run materializes into it.

The run (Spark, one input file per micro-batch) writes every batch into a Redis table as one
MULTI/EXEC with its batch marker (stores/redis/store.py). The server is a private one with an
append-only file synced at every write, so that a SIGKILL loses nothing it acknowledged, as a
production Redis configured not to lose writes; the file also counts the HSETs of every key.

- `CLIENT PAUSE ... WRITE` once a batch is in: the run's next MULTI/EXEC blocks (the test waits
  until it sees it among the server's blocked clients, holds it HOLD_S more, then unpauses) and
  goes on when the pause ends. Then the server is frozen
  (SIGSTOP: nothing answers, as on a frozen machine): the run's call times out after the store's
  `statement_timeout_ms`, is retried, and the run stops with one line that names the store, its
  password hidden. The server thawed, the same command finishes the stream.
- SIGKILL of the server once a batch is in, and a restart on the same port once the run has logged
  that it is retrying: the run retries the write and finishes by itself.

Each time the Redis hashes must equal what the reference executor writes, and no key may have been
written twice (a batch whose reply was lost may have been applied: its marker must make the retry
skip it): one HSET per row and one `~done` per batch marker.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from fault_helpers import (
    Feeder,
    PrivateRedis,
    error_line,
    generate,
    kill_all,
    reference_run,
    run_env,
    run_to_end,
    spark_logs,
    spark_run_args,
    start,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.redis]

SCRIPT = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE DATASTORE cache TYPE redis;
CREATE TABLE cost_of (id integer PRIMARY KEY, caller integer, cost integer) IN cache;
INSERT INTO priced SELECT id, caller, duration * 10 + 10 AS cost, ts FROM calls WHERE duration >= 10;
INSERT INTO TABLE cost_of SELECT id, caller, cost FROM priced;
"""

PASSWORD = "Redis-sentinel/pw:7"
HOLD_S = 3.0  # how long the pause holds the run's write
TIMEOUT_MS = 6000  # longer than that: the run must wait through the pause


def _hashes(client: redis.Redis) -> dict[bytes, dict[bytes, bytes]]:
    return {k: client.hgetall(k) for k in client.scan_iter(match="cost_of:*")}  # type: ignore[misc]


def _markers(client: redis.Redis) -> list[bytes]:
    return list(client.scan_iter(match="cep:ledger:*"))


def _wait_for(what: str, done: Callable[[], bool], alive: Callable[[], bool], limit: float = 180) -> None:
    deadline = time.monotonic() + limit
    while not done():
        assert alive(), f"the run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {limit:.0f} s"
        time.sleep(0.02)


class Setup:
    def __init__(self, tmp_path: Path, files: int, password: str | None = None) -> None:
        self.tmp_path = tmp_path
        self.server = PrivateRedis(tmp_path / "redis", password)
        self.script = tmp_path / "cost.cpl"
        self.script.write_text(SCRIPT, encoding="utf-8")
        self.feeder = Feeder(tmp_path / "in")
        self.inputs = generate(random.Random(11), files, 20)
        self.feeder.add(self.inputs)
        self.log = tmp_path / "spark.log"
        self.args = spark_run_args(self.script, tmp_path, [f"calls=file:{self.feeder.directory}"])

    def check(self, seen: str) -> None:
        """The hashes equal the reference's; every key written once."""
        client = self.server.client()
        got, markers = _hashes(client), _markers(client)
        assert len(markers) == len(self.inputs), seen  # one marker per batch
        reference = PrivateRedis(self.tmp_path / "ref-redis")
        reference.start()
        try:
            reference_run(
                self.script,
                [f"calls=file:{self.feeder.directory}"],
                [f"cache={reference.url}"],
                self.tmp_path,
            )
            want = _hashes(reference.client())
        finally:
            reference.stop()
        assert len(want) == sum(e["duration"] >= 10 for f in self.inputs for e in f)
        assert got == want, f"{seen}: {len(got)} hashes, the reference has {len(want)}"
        writes = self.server.writes()
        assert set(writes) == set(want) | set(markers), seen
        twice = {k: n for k, n in writes.items() if n != 1}
        assert not twice, f"{seen}: keys written more than once: {sorted(twice.items())[:5]}"


def test_redis_paused_then_frozen(tmp_path: Path) -> None:
    s = Setup(tmp_path, files=6, password=PASSWORD)
    s.server.start()
    try:
        # The URL (with its password) in the environment, not on the command line the log shows.
        env = run_env(
            tmp_path,
            CEP_STORE_CACHE_URL=f"{s.server.url}?statement_timeout_ms={TIMEOUT_MS}",
            CEP_STORE_RETRIES="2",
            CEP_STORE_RETRY_BASE_MS="200",
        )
        client = s.server.client()
        proc = start(s.args, env, tmp_path, s.log)
        try:
            alive: Callable[[], bool] = lambda: proc.poll() is None  # noqa: E731
            _wait_for("first batch in Redis", lambda: bool(_markers(client)), alive)

            # Paused: the run's next write waits (held HOLD_S once it is seen), then goes on.
            client.execute_command("CLIENT", "PAUSE", "120000", "WRITE")
            before = len(_markers(client))

            def held() -> bool:
                stats = client.info("clients")
                return int(stats.get("blocked_clients", 0)) >= 1  # type: ignore[union-attr]

            _wait_for("write held by the pause", held, alive, limit=100)
            time.sleep(HOLD_S)
            assert held() and len(_markers(client)) == before, "a batch got through the pause"
            client.execute_command("CLIENT", "UNPAUSE")
            _wait_for("batch after the pause", lambda: len(_markers(client)) > before, alive, limit=60)

            # Frozen: the run's call times out, is retried once, and the run stops.
            after_pause = len(_markers(client))
            s.server.freeze()
            frozen_at = time.monotonic()
            code = proc.wait(240)
            took = time.monotonic() - frozen_at
        finally:
            kill_all(proc)
            s.server.thaw()
        out = s.log.read_text(errors="replace")
        assert code not in (0, -9), f"the run did not fail ({code}):\n{out[-3000:]}"
        logged = out + spark_logs(tmp_path / "checkpoint")
        assert PASSWORD not in logged and "Redis-sentinel" not in logged
        line = error_line(out)
        assert "store cache (redis://:***@127.0.0.1:" in line and "into cost_of" in line, line
        assert "Timeout" in line and "after 2 attempts" in line, line
        assert "run the same command again to resume" in line, line
        assert took < 120, f"the run took {took:.0f} s to give up on a frozen server"
        assert after_pause < len(s.inputs)

        # Thawed: the same command finishes the stream.
        code, _, out = run_to_end(s.args, env, tmp_path, s.log)
        assert code == 0, out[-3000:]
        s.check(f"paused with {before} batch(es) in, frozen with {after_pause}")
    finally:
        s.server.stop()


def test_redis_restarted_the_run_retries(tmp_path: Path) -> None:
    s = Setup(tmp_path, files=5)
    s.server.start()
    try:
        proc = start([*s.args, "--store", f"cache={s.server.url}"], run_env(tmp_path), tmp_path, s.log)
        try:
            alive: Callable[[], bool] = lambda: proc.poll() is None  # noqa: E731
            client = s.server.client()
            _wait_for("first batch in Redis", lambda: bool(_markers(client)), alive)
            before = len(_markers(client))
            s.server.kill()
            seen = s.log.stat().st_size

            def retrying() -> bool:
                new = s.log.read_text(errors="replace")[seen:]
                return "store cache (redis://" in new and "retrying in" in new

            # Down until the run has found it down and said it retries; then back on the same port.
            _wait_for("retry of a Redis write", retrying, alive, limit=120)
            s.server.start()
            code = proc.wait(240)
        finally:
            kill_all(proc)
        assert code == 0, s.log.read_text(errors="replace")[-3000:]
        s.check(f"killed with {before} batch(es) in")
    finally:
        s.server.stop()
