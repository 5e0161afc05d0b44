"""Session-wide fixtures: real Postgres, Redis and Spark, started lazily and stopped at session end.

A test that uses `postgres_*`/`pg_db`, `redis_*` or `spark` must also carry the matching marker
(`@pytest.mark.postgres`, `.redis`, `.spark`) so `-m "not spark"` and friends select correctly; the
fixtures deliberately do not add markers themselves. A missing server is an error, never a skip.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis
from jvm_archive import jvm_options
from psycopg import sql
from servers import ServerHandle, start_postgres, start_redis
from sessions import make_spark_session

# Every JVM the tests start (the session below, each `cep run` subprocess and the standalone
# cluster's master and worker) compiles with C1 only: the tests' Spark jobs are small and short, and
# the C2 compiler's own work was a third of the CPU a `cep run` fault test used on this 2-core
# machine (test_graceful_stop.py: 76 s -> 61 s). SPARK_SUBMIT_OPTS is Spark's own hook for the
# launcher's JVM options; unlike JDK_JAVA_OPTIONS it prints nothing to stderr, which tests read.
# From the first test that starts a JVM, the options get a class-data sharing archive of Spark's
# classes (tests/jvm_archive.py) once it is made. Options of your own in SPARK_SUBMIT_OPTS are left
# as they are. With C1 alone the JVM reserves 48 MB for compiled code, which a worker's session
# (every test's streaming queries generate code of their own) filled within its first half-minute:
# the JVM then stops compiling until it has flushed some. With 256 MB (reserved address space,
# committed as used: ~70 MB after 16 minutes of the suite) it never fills;
# tests/fuzz/test_output_on_both_engines.py 206 -> 196 s and 183 -> 175 s (alternated, 2026-12-01).
JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"
# `cep run`'s own class archive (deployer.spark.run.jvm_archive) is off in the tests, which have theirs
# from the start (above); tests/spark/test_jvm_archive.py turns it on with a cache of its own.
os.environ.setdefault("CEP_JVM_ARCHIVE", "0")
_OWN_JVM_OPTS = [os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTS) == JVM_OPTS]


def _use_jvm_archive() -> None:
    """The archive in SPARK_SUBMIT_OPTS if it is made (its making started if need be), until it is."""
    if _OWN_JVM_OPTS[0]:
        os.environ["SPARK_SUBMIT_OPTS"] = jvm_options(JVM_OPTS)
        _OWN_JVM_OPTS[0] = os.environ["SPARK_SUBMIT_OPTS"] == JVM_OPTS  # not yet: ask again later


@pytest.fixture(autouse=True)
def _jvm_archive(request: pytest.FixtureRequest) -> None:
    """Before a test marked `spark` (its `cep run` subprocesses start JVMs too)."""
    if request.node.get_closest_marker("spark") is not None:
        _use_jvm_archive()


# Which way each server was obtained, filled in lazily, and the log file of the session fixture's
# JVM: printed in the terminal summary. Under pytest-xdist each worker has its own servers and
# session, and sends these lines to the controller, which prints them.
STARTED: dict[str, ServerHandle] = {}
STARTED_JVM: list[Path] = []
FROM_WORKERS: list[str] = []


def _summary() -> list[str]:
    lines = []
    if STARTED:
        ways = ", ".join(f"{name} via {h.how} ({h.detail}; {h.url})" for name, h in STARTED.items())
        lines.append(f"servers: {ways}")
    return lines + [f"spark log: {log}" for log in STARTED_JVM]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The test files that start `cep run` processes or a JVM of their own (marked `slow`) first,
    then the other Spark ones, then the rest, each file's tests together and in their order: with
    two workers (`make test`, `--dist loadfile --no-loadscope-reorder`), the longest files start
    first and the short ones fill in at the end, instead of a fault test starting last."""

    def rank(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("spark") else 2

    first: dict[str, int] = {}
    for item in items:
        first[item.path.as_posix()] = min(first.get(item.path.as_posix(), 2), rank(item))
    items.sort(key=lambda item: first[item.path.as_posix()])  # stable: files keep their order


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        worker = session.config.workerinput["workerid"]  # type: ignore[attr-defined]
        workeroutput["cep_summary"] = [f"{worker}: {line}" for line in _summary()]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    FROM_WORKERS.extend(getattr(node, "workeroutput", {}).get("cep_summary", []))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _summary() + FROM_WORKERS:
        terminalreporter.write_line(line)


def _with_database(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


# --------------------------------------------------------------------------------------------------
# PostgreSQL


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[ServerHandle]:
    handle = start_postgres()
    STARTED["postgres"] = handle
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: ServerHandle) -> str:
    return postgres_server.url


@pytest.fixture
def pg_db(postgres_url: str) -> Iterator[str]:
    """URL of a fresh, empty database of its own for this test; dropped afterwards."""
    name = f"t_{secrets.token_hex(6)}"
    # CREATE/DROP DATABASE cannot run inside a transaction block, hence autocommit.
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield _with_database(postgres_url, name)
    # FORCE (PG 13+) drops it even if the code under test leaked a connection.
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# --------------------------------------------------------------------------------------------------
# Redis


@pytest.fixture(scope="session")
def redis_server() -> Iterator[ServerHandle]:
    handle = start_redis()
    STARTED["redis"] = handle
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: ServerHandle) -> str:
    return redis_server.url


@pytest.fixture
def redis_db(redis_url: str) -> str:
    """URL of an emptied Redis database for this test.

    FLUSHDB rather than FLUSHALL: only the database named in the URL is ours to wipe, which matters
    when the URL came from CEP_TEST_REDIS_URL.
    """
    with redis.Redis.from_url(redis_url) as client:
        client.flushdb()
    return redis_url


# --------------------------------------------------------------------------------------------------
# Spark: one session per run (JVM start-up costs seconds)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one Spark session of this test process (each xdist worker has its own), its JVM's output
    in a log file (named in the run's summary), with the settings `cep run` gives its own session
    (deployer.spark.run.session) and cheaper ones where they change nothing a test checks."""
    _use_jvm_archive()
    log = tmp_path_factory.mktemp("spark-log") / "spark.log"
    session = make_spark_session(tmp_path_factory.mktemp("spark-warehouse"), log=log)
    if log.exists():
        STARTED_JVM.append(log)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def spark_queries_stopped(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used `spark`, stop every streaming query it left running, quietly.

    Only looks at tests that requested `spark`, so it never starts a JVM for the others. Stopping a
    query cancels its job and Spark logs the cancellation as an error with a stack trace, so logging is
    switched off around the stop.
    """
    yield
    if "spark" not in request.fixturenames:
        return
    session = request.getfixturevalue("spark")
    active = session.streams.active
    if not active:
        return
    session.sparkContext.setLogLevel("OFF")
    try:
        for query in active:
            with contextlib.suppress(Exception):
                query.stop()
        with contextlib.suppress(Exception):
            session.streams.resetTerminated()
    finally:
        session.sparkContext.setLogLevel("ERROR")
