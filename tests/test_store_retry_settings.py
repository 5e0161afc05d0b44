"""The data stores' retry policy comes from the deployer's settings: `CEP_STORE_RETRIES` and
`CEP_STORE_RETRY_BASE_MS` are parsed and validated in deployer/settings.py, and `bind_stores` puts
the policy into the bindings the stores are opened from (stores read no environment variable)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cpl.compiler import compile_script
from deployer.runner import bind_stores
from deployer.settings import Settings, SettingsError
from stores.registry import StoreRegistry
from stores.retry import RetryPolicy

SCRIPT = """
CREATE STREAMSCHEMA pay WITH id integer, amount integer;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY charge ON crm AS 'UPDATE balances SET amount = amount - ? WHERE id = ?';
INSERT INTO charged SELECT id, c.n FROM pay ON SQL charge, c, amount, id, n;
"""


def test_the_retry_variables_are_parsed_and_validated() -> None:
    default = Settings.from_env({})
    assert (default.store_retries, default.store_retry_base_ms) == (5, 500)
    assert RetryPolicy(default.store_retries, default.store_retry_base_ms / 1000) == RetryPolicy()
    given = Settings.from_env({"CEP_STORE_RETRIES": "1", "CEP_STORE_RETRY_BASE_MS": "0"})
    assert (given.store_retries, given.store_retry_base_ms) == (1, 0)
    with pytest.raises(SettingsError, match="CEP_STORE_RETRIES='x' is not an integer"):
        Settings.from_env({"CEP_STORE_RETRIES": "x"})
    with pytest.raises(SettingsError, match="CEP_STORE_RETRIES=0 must be at least 1"):
        Settings.from_env({"CEP_STORE_RETRIES": "0"})
    with pytest.raises(SettingsError, match="CEP_STORE_RETRY_BASE_MS=-1 must be at least 0"):
        Settings.from_env({"CEP_STORE_RETRY_BASE_MS": "-1"})


def test_bind_stores_gives_the_stores_the_policy_of_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    graph = compile_script(SCRIPT).graph
    monkeypatch.setenv("CEP_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("CEP_STORE_RETRIES", raising=False)
    monkeypatch.delenv("CEP_STORE_RETRY_BASE_MS", raising=False)
    unset = bind_stores(graph, {})
    assert unset is not None and unset.retry == RetryPolicy()

    monkeypatch.setenv("CEP_STORE_RETRIES", "3")
    monkeypatch.setenv("CEP_STORE_RETRY_BASE_MS", "50")
    bindings = bind_stores(graph, {})
    assert bindings is not None and bindings.retry == RetryPolicy(tries=3, base_s=0.05)
    registry = StoreRegistry(bindings)
    try:
        assert registry.store("crm").retry == RetryPolicy(tries=3, base_s=0.05)  # type: ignore[attr-defined]
    finally:
        registry.close()

    monkeypatch.setenv("CEP_STORE_RETRIES", "0")
    with pytest.raises(SettingsError, match="CEP_STORE_RETRIES=0"):
        bind_stores(graph, {})
