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
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis
from psycopg import sql
from servers import ServerHandle, start_postgres, start_redis
from sessions import make_spark_session

# Every JVM the tests start (the session below, each `cep run` subprocess and the standalone
# cluster's master and worker) compiles with C1 only: the tests' Spark jobs are small and short, and
# the C2 compiler's own work was a third of the CPU a `cep run` fault test used on this 2-core
# machine (test_graceful_stop.py: 76 s -> 61 s). SPARK_SUBMIT_OPTS is Spark's own hook for the
# launcher's JVM options; unlike JDK_JAVA_OPTIONS it prints nothing to stderr, which tests read.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# Which way each server was obtained, filled in lazily, printed in the terminal summary.
STARTED: dict[str, ServerHandle] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if STARTED:
        ways = ", ".join(f"{name} via {h.how} ({h.detail}; {h.url})" for name, h in STARTED.items())
        terminalreporter.write_line(f"servers: {ways}")


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
    session = make_spark_session(tmp_path_factory.mktemp("spark-warehouse"))
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
