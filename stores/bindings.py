"""Binding the data stores a script declares to URLs: `StoreBindings`, and `resolve_bindings`.

A script names its stores (`CREATE DATASTORE crm TYPE postgresql`); where they live comes from
configuration (docs/architecture.md, decision 7): `--store NAME=URL`, the environment variable
`CEP_STORE_<NAME>_URL` (from the environment mapping the caller gives; stores read no variable
themselves), or the embedded SQLite default. The result, with the retry policy the deployer chose
(from its settings), is all an engine needs to open the stores, in this process or in another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from operators.graph import DataStore
from stores.errors import StoreConfigError
from stores.retry import RetryPolicy
from stores.urls import StoreURL, parse_store_url


@dataclass(frozen=True)
class StoreBindings:
    """Where a script's data stores live and how calls to them are retried; picklable (Spark sends
    it to its Python workers, which open the stores from it: stores/registry.py).

    `urls` and `declared` are keyed alike, by the keys of the script's `Graph.stores`.
    `deployment` names the deployment for the exactly-once ledger (stores/ledger.py): a replay of
    the same deployment skips what already took effect, so two different deployments must not
    share it; None lets the engine name it (deployer.spark.datastores.sql.deployment_of).
    """

    urls: Mapping[str, StoreURL]
    declared: Mapping[str, DataStore]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    deployment: str | None = None


def env_var_for(name: str) -> str:
    """`CEP_STORE_<NAME>_URL`: the name upper-cased, characters other than A-Z, 0-9 and _ as `_`."""
    return "CEP_STORE_" + re.sub(r"[^A-Z0-9_]", "_", name.upper()) + "_URL"


def default_sqlite_path(default_dir: Path, name: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.\-]", lambda m: f"%{ord(m.group()):02X}", name)
    return Path(default_dir).resolve() / f"{safe}.sqlite3"


def resolve_bindings(
    declared: Mapping[str, DataStore],
    cli: Mapping[str, str],
    env: Mapping[str, str],
    default_dir: Path,
    *,
    retry: RetryPolicy | None = None,
) -> StoreBindings:
    """The URL each declared store is bound to, keyed like `declared`, with the retry policy
    (`RetryPolicy()` when none is given).

    Precedence: `--store NAME=URL` (`cli`, names matched case-insensitively) > the environment
    variable `CEP_STORE_<NAME>_URL` > the embedded default. The embedded default is a SQLite file
    `default_dir/<name>.sqlite3` for stores declared `postgresql` or `sqlite`, so a script runs with
    no server at all; a `redis` store has no default and must be bound. A URL of another kind than
    the declaration is refused, except that a store declared `postgresql` may be bound to SQLite
    (that is what the embedded default does; the user's SQL must then be valid SQLite, too).

    All problems are collected and raised together in one `StoreConfigError`.
    """
    problems: list[str] = []
    cli_texts = _cli_texts(declared, cli, problems)
    urls: dict[str, StoreURL] = {}
    for key, ds in declared.items():
        try:
            urls[key] = bind_store(ds, cli_texts.get(key), env, default_dir)
        except StoreConfigError as e:
            problems.append(e.detail)
    if problems:
        raise StoreConfigError("\n".join(problems))
    return StoreBindings(urls, dict(declared), retry or RetryPolicy())


def bind_store(ds: DataStore, cli_text: str | None, env: Mapping[str, str], default_dir: Path) -> StoreURL:
    """The URL one declared store is bound to (`cli_text`: its `--store` URL, if given), by the
    precedence and rules of `resolve_bindings`; StoreConfigError saying why it cannot be bound.
    (The compiler's describer binds each store this way when it first needs it: runner.describer.)"""
    try:
        url = _url_for(ds, cli_text, env, default_dir)
    except StoreConfigError as e:
        raise StoreConfigError(f"data store {ds.name}: {e}") from None
    if url is None:
        raise StoreConfigError(
            f"data store {ds.name} (TYPE {ds.type}) is not bound to a URL and has no embedded default: "
            f"set {env_var_for(ds.name)}=redis://host:6379/0 or pass --store {ds.name}=redis://host:6379/0"
        )
    if url.kind != ds.type and not (ds.type == "postgresql" and url.kind == "sqlite"):
        raise StoreConfigError(
            f"data store {ds.name} is declared TYPE {ds.type} but bound to {url.redacted()} "
            f"(a {url.kind} URL, from {url.origin})"
        )
    return url


def _cli_texts(
    declared: Mapping[str, DataStore], cli: Mapping[str, str], problems: list[str]
) -> dict[str, str]:
    """The `--store` URL texts by key of `declared`; a name no store has is a problem."""
    by_lower = {ds.name.lower(): key for key, ds in declared.items()}
    texts: dict[str, str] = {}
    for name, text in cli.items():
        key = by_lower.get(name.lower())
        if key is None:
            known = ", ".join(sorted(ds.name for ds in declared.values())) or "none"
            problems.append(f"--store {name}=...: no data store {name} is declared (declared: {known})")
        else:
            texts[key] = text
    return texts


def _url_for(
    ds: DataStore, cli_text: str | None, env: Mapping[str, str], default_dir: Path
) -> StoreURL | None:
    """The store's URL by precedence; None when nothing binds it and it has no embedded default."""
    var = env_var_for(ds.name)
    if cli_text is not None:
        return parse_store_url(cli_text, origin="--store")
    if env.get(var):
        return parse_store_url(env[var], origin=f"env {var}")
    if ds.type in ("postgresql", "sqlite"):
        path = default_sqlite_path(default_dir, ds.name)
        return StoreURL("sqlite", database=str(path), origin="embedded default")
    return None
