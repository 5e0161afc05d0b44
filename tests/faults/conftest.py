"""Fixtures for the fault tests: a second fresh PostgreSQL database, for an oracle run beside the run
under test (`pg_db` from tests/conftest.py gives only one per test)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql


@pytest.fixture
def pg_reference_db(postgres_url: str) -> Iterator[str]:
    """URL of another fresh, empty database on the session's server; dropped afterwards."""
    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
