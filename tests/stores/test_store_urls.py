"""Data store URLs: parsing, normalising, redaction, password files, and binding resolution."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from operators.graph import DataStore
from stores.bindings import env_var_for, resolve_bindings
from stores.errors import StoreConfigError
from stores.retry import RetryPolicy
from stores.urls import StoreURL, parse_store_url

SENTINEL = "S3ntinel-pw_xyzzy"


# --------------------------------------------------------------------------------------------------
# Parsing and normalising


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://alice:pw@db.example:5433/crm",
        "postgres://alice:pw@db.example:5433/crm",
        "postgresql+psycopg://alice:pw@db.example:5433/crm",
        "POSTGRESQL://alice:pw@DB.example:5433/crm",
    ],
)
def test_postgres_spellings_normalise_to_one_value(text: str) -> None:
    url = parse_store_url(text)
    assert url == StoreURL("postgresql", "db.example", 5433, "crm", "alice", "pw")
    assert url.redacted() == "postgresql://alice:***@db.example:5433/crm"
    sa_url = url.sqlalchemy_url()
    assert sa_url.drivername == "postgresql+psycopg"
    assert (sa_url.username, sa_url.password, sa_url.host, sa_url.port, sa_url.database) == (
        "alice",
        "pw",
        "db.example",
        5433,
        "crm",
    )
    conninfo = url.libpq_conninfo()
    for part in ("host=db.example", "port=5433", "dbname=crm", "user=alice", "password=pw"):
        assert part in conninfo


def test_postgres_percent_encoded_credentials_and_options() -> None:
    url = parse_store_url("postgresql://al%40ce:p%40ss%3Aw%2Fd@h/db?sslmode=require&application_name=cep")
    assert url.username == "al@ce" and url.password == "p@ss:w/d"
    assert dict(url.options) == {"sslmode": "require", "application_name": "cep"}
    assert url.port is None
    conninfo = url.libpq_conninfo()
    assert "sslmode=require" in conninfo and "application_name=cep" in conninfo
    assert url.redacted() == "postgresql://al%40ce:***@h/db?application_name=cep&sslmode=require"


def test_ipv6_host_round_trips() -> None:
    url = parse_store_url("postgresql://u@[::1]:5432/db")
    assert url.host == "::1"
    assert url.redacted() == "postgresql://u@[::1]:5432/db"


@pytest.mark.parametrize(
    ("text", "database"),
    [
        ("sqlite:///:memory:", ":memory:"),
        ("sqlite://", ":memory:"),
        ("sqlite:///relative/dir/x.db", "relative/dir/x.db"),
        ("sqlite:////abs/dir/x.db", "/abs/dir/x.db"),
        ("sqlite+pysqlite:////abs/x.db", "/abs/x.db"),
    ],
)
def test_sqlite_urls(text: str, database: str) -> None:
    url = parse_store_url(text)
    assert url.kind == "sqlite" and url.database == database
    assert url.is_memory == (database == ":memory:")
    assert parse_store_url(url.redacted()) == url  # the normal form parses back to the same value
    assert url.sqlalchemy_url().drivername == "sqlite"


def test_redis_urls() -> None:
    plain = parse_store_url("redis://cache.example")
    assert (plain.kind, plain.host, plain.port, plain.database, plain.password) == (
        "redis",
        "cache.example",
        None,
        "0",
        None,
    )
    assert plain.redis_kwargs() == {
        "host": "cache.example",
        "port": 6379,
        "db": 0,
        "username": None,
        "password": None,
    }
    secured = parse_store_url(f"rediss://:{SENTINEL}@10.0.0.1:6380/3")
    assert secured.tls and secured.database == "3" and secured.password == SENTINEL
    assert secured.redacted() == "rediss://:***@10.0.0.1:6380/3"
    assert secured.redis_kwargs()["password"] == SENTINEL
    assert "connection_class" in secured.redis_kwargs()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("crm.example:5432", "expected scheme://"),
        ("mysql://u@h/db", "unknown scheme 'mysql'"),
        ("redis://h:6379/zero", "a redis database is a number"),
        ("postgresql://u@h:notaport/db", "invalid data store URL"),
        ("sqlite://host/x.db", "a sqlite URL has no host"),
        ("postgresql://u@h1:5432,h2:5432/db", "several hosts"),
        ("postgresql://u@h/db?statement_timeout_ms=soon", "statement_timeout_ms must be a positive integer"),
        ("redis://h/0?socket_timeout=1", "unsupported redis option"),
    ],
)
def test_malformed_urls_are_refused_clearly(text: str, message: str) -> None:
    with pytest.raises(StoreConfigError, match=message):
        parse_store_url(text)


def test_statement_timeout_option_is_ours_not_libpq() -> None:
    url = parse_store_url("postgresql://u@h/db?statement_timeout_ms=250&sslmode=disable")
    assert url.statement_timeout_ms == 250
    assert "statement_timeout" not in url.libpq_conninfo()
    assert url.redacted() == "postgresql://u@h/db?sslmode=disable&statement_timeout_ms=250"


# --------------------------------------------------------------------------------------------------
# Redaction: the sentinel password must never show


@pytest.mark.parametrize(
    "text",
    [
        f"postgresql://alice:{SENTINEL}@h:5432/db",
        f"postgres://alice@h/db?password={SENTINEL}&sslmode=require",
        f"redis://:{SENTINEL}@h:6379/0",
        f"redis://bob:{SENTINEL}@h:6379/1",
    ],
)
def test_password_never_in_str_repr_or_sqlalchemy_url(text: str) -> None:
    url = parse_store_url(text)
    assert url.password == SENTINEL
    shown = [str(url), repr(url), url.redacted(), f"{url}", str([url]), str({"crm": url})]
    if url.kind == "postgresql":
        shown += [str(url.sqlalchemy_url()), repr(url.sqlalchemy_url())]
    for s in shown:
        assert SENTINEL not in s
        assert "***" in s


@pytest.mark.parametrize(
    "text",
    [
        f"postgresql://alice:{SENTINEL}@h:notaport/db",
        f"postgresql://alice:{SENTINEL}@h1,h2/db",
        f"mysql://alice:{SENTINEL}@h/db",
        f"redis://:{SENTINEL}@h:6379/zero",
        f"postgres://alice@h:bad/db?password={SENTINEL}",
    ],
)
def test_password_never_in_parse_errors(text: str) -> None:
    with pytest.raises(StoreConfigError) as info:
        parse_store_url(text)
    assert SENTINEL not in str(info.value)
    assert "***" in str(info.value)


def test_password_in_both_places_is_ambiguous() -> None:
    with pytest.raises(StoreConfigError, match="both") as info:
        parse_store_url(f"postgresql://u:{SENTINEL}@h/db?password=other")
    assert SENTINEL not in str(info.value)


# --------------------------------------------------------------------------------------------------
# Password files


def _secret_file(tmp_path: Path, content: str, mode: int) -> Path:
    path = tmp_path / "pw"
    path.write_text(content)
    os.chmod(path, mode)
    return path


def test_password_file_is_read_and_not_shown(tmp_path: Path) -> None:
    path = _secret_file(tmp_path, SENTINEL + "\n", 0o600)
    url = parse_store_url(f"postgresql://alice@h/db?password_file={path}")
    assert url.password == SENTINEL  # one trailing newline dropped
    assert f"password={SENTINEL}" in url.libpq_conninfo()
    assert url.redacted() == f"postgresql://alice@h/db?password_file={str(path).replace('/', '%2F')}"
    assert SENTINEL not in repr(url)


def test_password_file_keeps_inner_whitespace(tmp_path: Path) -> None:
    path = _secret_file(tmp_path, " a b \r\n", 0o400)
    assert parse_store_url(f"redis://h/0?password_file={path}").password == " a b "


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_password_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = _secret_file(tmp_path, SENTINEL, mode)
    with pytest.raises(StoreConfigError, match="readable by group or others") as info:
        parse_store_url(f"postgresql://alice@h/db?password_file={path}")
    assert f"chmod 600 {path}" in str(info.value)
    assert SENTINEL not in str(info.value)


def test_password_file_missing_empty_or_doubled(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError, match="No such file"):
        parse_store_url(f"postgresql://u@h/db?password_file={tmp_path / 'absent'}")
    empty = _secret_file(tmp_path, "\n", 0o600)
    with pytest.raises(StoreConfigError, match="is empty"):
        parse_store_url(f"postgresql://u@h/db?password_file={empty}")
    with pytest.raises(StoreConfigError, match="not both"):
        parse_store_url(f"postgresql://u:pw@h/db?password_file={empty}")
    with pytest.raises(StoreConfigError, match="not a regular file"):
        parse_store_url(f"postgresql://u@h/db?password_file={tmp_path}")


# --------------------------------------------------------------------------------------------------
# Binding declared stores


DECLARED = {
    "crm": DataStore("crm", "postgresql"),
    "local": DataStore("Local", "sqlite"),
    "cache": DataStore("cache", "redis"),
}


def test_precedence_cli_over_env_over_default(tmp_path: Path) -> None:
    env = {
        "CEP_STORE_CRM_URL": "postgresql://env@envhost/crm",
        "CEP_STORE_LOCAL_URL": "sqlite:////env/local.db",
        "CEP_STORE_CACHE_URL": "redis://envcache:6379/2",
    }
    cli = {"CRM": "postgres://cli@clihost/crm"}  # names match case-insensitively
    got = resolve_bindings(DECLARED, cli, env, tmp_path).urls
    assert got["crm"] == parse_store_url("postgresql://cli@clihost/crm")
    assert got["crm"].origin == "--store"
    assert got["local"].database == "/env/local.db" and got["local"].origin == "env CEP_STORE_LOCAL_URL"
    assert got["cache"].host == "envcache" and got["cache"].database == "2"

    no_env = resolve_bindings(DECLARED, {}, {"CEP_STORE_CACHE_URL": "redis://c/0"}, tmp_path).urls
    assert no_env["crm"] == StoreURL("sqlite", database=str(tmp_path.resolve() / "crm.sqlite3"))
    assert no_env["crm"].origin == "embedded default"
    assert no_env["local"].database == str(tmp_path.resolve() / "Local.sqlite3")


def test_unbound_redis_store_names_the_variable_and_the_flag(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError) as info:
        resolve_bindings(DECLARED, {}, {}, tmp_path)
    message = str(info.value)
    assert "CEP_STORE_CACHE_URL" in message and "--store cache=" in message
    assert "crm" not in message  # the SQL stores got their embedded default


def test_kind_mismatch_is_refused_except_postgresql_on_sqlite(tmp_path: Path) -> None:
    ok = resolve_bindings(
        {"crm": DataStore("crm", "postgresql")}, {"crm": "sqlite:///:memory:"}, {}, tmp_path
    ).urls
    assert ok["crm"].kind == "sqlite"
    with pytest.raises(StoreConfigError, match="declared TYPE sqlite but bound to postgresql://"):
        resolve_bindings({"l": DataStore("l", "sqlite")}, {"l": "postgresql://u@h/db"}, {}, tmp_path)
    with pytest.raises(StoreConfigError, match="declared TYPE redis"):
        resolve_bindings({"c": DataStore("c", "redis")}, {}, {"CEP_STORE_C_URL": "sqlite://"}, tmp_path)


def test_all_binding_problems_reported_at_once_without_passwords(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError) as info:
        resolve_bindings(
            DECLARED,
            {"crmm": "postgresql://u@h/db", "local": f"redis://:{SENTINEL}@h/0"},
            {"CEP_STORE_CRM_URL": f"postgresql://u:{SENTINEL}@h:x/db"},
            tmp_path,
        )
    message = str(info.value)
    assert "--store crmm=...: no data store crmm is declared (declared: Local, cache, crm)" in message
    assert "data store crm: invalid data store URL" in message
    assert "data store Local is declared TYPE sqlite but bound to redis://:***@h/0" in message
    assert "CEP_STORE_CACHE_URL" in message
    assert SENTINEL not in message


def test_bindings_carry_their_retry_policy_and_pickle(tmp_path: Path) -> None:
    # Spark pickles the bindings to its Python workers, which open the stores from them.
    env = {"CEP_STORE_CRM_URL": f"postgresql://u:{SENTINEL}@h/crm", "CEP_STORE_CACHE_URL": "redis://c/0"}
    bindings = resolve_bindings(DECLARED, {}, env, tmp_path, retry=RetryPolicy(tries=2, base_s=0.1))
    assert bindings.retry == RetryPolicy(tries=2, base_s=0.1) and bindings.deployment is None
    assert bindings.declared == DECLARED and set(bindings.urls) == set(DECLARED)
    again = pickle.loads(pickle.dumps(bindings))
    assert again == bindings and again.urls["crm"].password == SENTINEL
    assert resolve_bindings(DECLARED, {}, env, tmp_path).retry == RetryPolicy()


def test_env_var_names() -> None:
    assert env_var_for("crm") == "CEP_STORE_CRM_URL"
    assert env_var_for("my-store.eu") == "CEP_STORE_MY_STORE_EU_URL"
