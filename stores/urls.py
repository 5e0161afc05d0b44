"""Data store URLs: parsing, normalising, redaction (stores/bindings.py binds CPL stores to them).

A script names its stores (`CREATE DATASTORE crm TYPE postgresql`); where they live comes from
configuration (docs/architecture.md, decision 7). Accepted spellings:

    postgresql://user:pass@host:port/db?sslmode=require     (also postgres://, postgresql+psycopg://)
    sqlite:///relative/path.db   sqlite:////absolute/path.db   sqlite:///:memory:
    redis://[[user]:pass@]host:port/db   rediss://...  (TLS)

Query options understood by every kind:

    password_file=/path      the password is the file's content (one trailing newline dropped); the
                             file must not be readable by group or others (like ~/.pgpass)
    statement_timeout_ms=N   per-statement timeout for SQL stores, per-reply timeout for Redis
                             (default 30 s)

Other query options of a postgresql URL (sslmode, connect_timeout, application_name, options, host
for a Unix socket ...) are passed to libpq unchanged; `password=` is taken as the password.

A `StoreURL` prints (`str`, `repr`, `redacted()`) with the password replaced by `***`; only
`libpq_conninfo()`, `sqlalchemy_url()` and `redis_kwargs()` hand the password to a driver.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit

from stores.errors import StoreConfigError

if TYPE_CHECKING:
    import sqlalchemy as sa

KINDS = ("postgresql", "sqlite", "redis")

_SCHEMES = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "postgresql+psycopg": "postgresql",
    "postgresql+psycopg2": "postgresql",  # accepted for convenience; psycopg 3 is what connects
    "sqlite": "sqlite",
    "sqlite+pysqlite": "sqlite",
    "redis": "redis",
    "rediss": "redis",
}
_OUR_OPTIONS = ("password_file", "statement_timeout_ms")


@dataclass(frozen=True, repr=False)
class StoreURL:
    kind: str  # "postgresql" | "sqlite" | "redis"
    host: str | None = None
    port: int | None = None
    database: str | None = None  # postgres: db name; sqlite: file path or ":memory:"; redis: db number
    username: str | None = None
    password: str | None = field(default=None, compare=False)
    options: tuple[tuple[str, str], ...] = ()  # driver options passed through (postgresql only)
    password_file: str | None = None
    tls: bool = False  # rediss://
    statement_timeout_ms: int | None = None
    # Where the binding came from ("--store", "env CEP_STORE_X_URL", "embedded default"); display only.
    origin: str = field(default="", compare=False)

    # -- parsing ---------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str, origin: str = "") -> StoreURL:
        return parse_store_url(text, origin)

    # -- display ---------------------------------------------------------------------------------

    def redacted(self) -> str:
        """The normalised URL with any password shown as `***`."""
        return self._render(redact=True)

    def __str__(self) -> str:
        return self.redacted()

    def __repr__(self) -> str:
        return f"StoreURL({self.redacted()!r})"

    @property
    def is_memory(self) -> bool:
        return self.kind == "sqlite" and self.database in (None, "", ":memory:")

    def _render(self, redact: bool) -> str:
        opts = list(self.options)
        if self.password_file:
            opts.append(("password_file", self.password_file))
        if self.statement_timeout_ms is not None:
            opts.append(("statement_timeout_ms", str(self.statement_timeout_ms)))
        query = ("?" + urlencode(opts)) if opts else ""
        if self.kind == "sqlite":
            return f"sqlite:///{self.database or ':memory:'}{query}"
        scheme = "rediss" if self.tls else self.kind
        userinfo = quote(self.username or "", safe="")
        if self.password is not None and not self.password_file:
            userinfo += ":" + ("***" if redact else quote(self.password, safe=""))
        host = self.host or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        netloc = (userinfo + "@" if userinfo else "") + host + (f":{self.port}" if self.port else "")
        path = "/" + quote(self.database, safe="") if self.database else ""
        return f"{scheme}://{netloc}{path}{query}"

    # -- conversions for drivers (these carry the password) ---------------------------------------

    def libpq_conninfo(self) -> str:
        """A libpq connection string for psycopg."""
        # Imported here, as sqlalchemy below: this module is imported by every Python worker Spark
        # starts for a deployment (the operators' code imports the store bindings), and the drivers'
        # own imports were a third of a fresh worker's start-up on a loaded machine.
        from psycopg.conninfo import make_conninfo

        self._expect("postgresql")
        params: dict[str, Any] = dict(self.options)
        for key, value in (
            ("host", self.host),
            ("port", self.port),
            ("dbname", self.database),
            ("user", self.username),
            ("password", self.password),
        ):
            if value is not None:
                params[key] = value
        return make_conninfo("", **params)

    def sqlalchemy_url(self) -> sa.URL:
        """A SQLAlchemy URL (postgresql+psycopg or sqlite); its own str() also hides the password."""
        import sqlalchemy as sa

        if self.kind == "postgresql":
            return sa.URL.create(
                "postgresql+psycopg",
                username=self.username,
                password=self.password,
                host=self.host,
                port=self.port,
                database=self.database,
                query=dict(self.options),
            )
        self._expect("sqlite")
        return sa.URL.create("sqlite", database=None if self.is_memory else self.database)

    def redis_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `redis.Redis` / `redis.ConnectionPool`."""
        self._expect("redis")
        kwargs: dict[str, Any] = {
            "host": self.host or "localhost",
            "port": self.port or 6379,
            "db": int(self.database or 0),
            "username": self.username,
            "password": self.password,
        }
        if self.tls:
            # Imported here, not at the top: only a TLS Redis URL needs the redis client, and URLs are
            # parsed where no store is opened (the CLI, the service's catalog).
            from redis.connection import SSLConnection

            kwargs["connection_class"] = SSLConnection
        return kwargs

    def _expect(self, kind: str) -> None:
        if self.kind != kind:
            raise StoreConfigError(f"{self.redacted()} is a {self.kind} URL, not {kind}")


# ---------------------------------------------------------------------------------------------
# Parsing


_USERINFO = re.compile(r"(?P<scheme>^[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^:@/]*):(?P<pw>.*)@", re.S)
_PW_OPTION = re.compile(r"(password=)[^&\s]*", re.I)


def redact_text(text: str) -> str:
    """Best-effort redaction of a raw, possibly malformed URL, for error messages about it."""
    m = _USERINFO.match(text)
    if m:
        text = f"{m['scheme']}{m['user']}:***@" + text[m.end() :]
    return _PW_OPTION.sub(r"\1***", text)


class _Invalid(Exception):
    """Why a URL's text is refused; `parse_store_url` says which URL (redacted)."""


def parse_store_url(text: str, origin: str = "") -> StoreURL:
    text = text.strip()
    try:
        return _parse(text, origin)
    except _Invalid as e:
        raise StoreConfigError(f"invalid data store URL {redact_text(text)}: {e}") from None


def _parse(text: str, origin: str) -> StoreURL:
    scheme, kind = _scheme(text)
    parts, port = _split(text)
    options = _options(parts.query)
    password, password_file = _password(parts, options)
    common: dict[str, Any] = {
        "password_file": password_file,
        "statement_timeout_ms": _statement_timeout(options),
    }
    if kind == "sqlite":
        return _sqlite_url(parts, options, origin, common)
    username = unquote(parts.username) if parts.username else None
    host = parts.hostname  # lower-cased, brackets of an IPv6 literal removed
    database = unquote(parts.path[1:]) if len(parts.path) > 1 else None
    if database is not None and "/" in database:
        raise _Invalid(f"database name {database!r} contains '/'")
    server: dict[str, Any] = {"host": host, "port": port, "username": username, "password": password}
    if kind == "redis":
        return _redis_url(database, options, tls=scheme == "rediss", origin=origin, **server, **common)
    return StoreURL(
        "postgresql",
        database=database,
        options=tuple(sorted(options.items())),
        origin=origin,
        **server,
        **common,
    )


def _scheme(text: str) -> tuple[str, str]:
    """The scheme as written (lower-cased) and the kind of store it names."""
    if "://" not in text:
        raise _Invalid("expected scheme://..., e.g. postgresql://user@host:5432/db")
    scheme = text.split("://", 1)[0].lower()
    kind = _SCHEMES.get(scheme)
    if kind is None:
        known = ", ".join(sorted(_SCHEMES))
        raise _Invalid(f"unknown scheme {scheme!r} (known: {known})")
    return scheme, kind


def _split(text: str) -> tuple[SplitResult, int | None]:
    """The URL's parts and its port: one host at most, a numeric port, no fragment."""
    try:
        parts = urlsplit(text)
        if "," in parts.netloc:
            raise _Invalid("several hosts in one URL are not supported")
        port = parts.port
    except ValueError as e:
        raise _Invalid(str(e)) from None
    if parts.fragment:
        raise _Invalid("fragments (#...) are not allowed")
    return parts, port


def _options(query: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in options:
            raise _Invalid(f"option {key} given twice")
        options[key] = value
    return options


def _password(parts: SplitResult, options: dict[str, str]) -> tuple[str | None, str | None]:
    """The password (from the URL, `?password=` or `?password_file=`, one of them at most) and the
    password file; both options are taken out of `options`."""
    password = unquote(parts.password) if parts.password is not None else None
    if "password" in options:
        if password is not None:
            raise _Invalid("password given both in the URL and as ?password=")
        password = options.pop("password")
    password_file = options.pop("password_file", None)
    if password_file is not None:
        if password is not None:
            raise _Invalid("give either a password or ?password_file=, not both")
        password = read_password_file(password_file)
    return password, password_file


def _statement_timeout(options: dict[str, str]) -> int | None:
    if "statement_timeout_ms" not in options:
        return None
    raw = options.pop("statement_timeout_ms")
    if not raw.isdigit() or int(raw) <= 0:
        raise _Invalid(f"statement_timeout_ms must be a positive integer, not {raw!r}")
    return int(raw)


def _sqlite_url(parts: SplitResult, options: dict[str, str], origin: str, common: dict[str, Any]) -> StoreURL:
    if parts.netloc:
        raise _Invalid("a sqlite URL has no host: use sqlite:///relative.db or sqlite:////abs/path.db")
    if options:
        raise _Invalid(f"unsupported sqlite option(s): {', '.join(sorted(options))}")
    path = unquote(parts.path[1:]) if parts.path.startswith("/") else unquote(parts.path)
    return StoreURL("sqlite", database=path or ":memory:", origin=origin, **common)


def _redis_url(database: str | None, options: dict[str, str], **fields: Any) -> StoreURL:
    if options:
        raise _Invalid(f"unsupported redis option(s): {', '.join(sorted(options))}")
    if database is not None and not database.isdigit():
        raise _Invalid(f"a redis database is a number, not {database!r}")
    return StoreURL("redis", database=database or "0", **fields)


def read_password_file(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError as e:
        raise StoreConfigError(f"password file {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StoreConfigError(f"password file {path} is not a regular file")
    if st.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        raise StoreConfigError(
            f"password file {path} is readable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"restrict it with: chmod 600 {path}"
        )
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read()
    except OSError as e:
        raise StoreConfigError(f"password file {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise StoreConfigError(f"password file {path} is not UTF-8 text") from None
    password = content[:-2] if content.endswith("\r\n") else content.removesuffix("\n")
    if not password:
        raise StoreConfigError(f"password file {path} is empty")
    return password
