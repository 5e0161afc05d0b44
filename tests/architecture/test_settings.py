"""Every CEP_* variable is declared once (deployer/settings.py), documented in docs/settings.md from
that declaration, read nowhere else, and refused with its name and value when it cannot be used."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deployer.settings import Settings, SettingsError, current, documented

ROOT = Path(__file__).resolve().parents[2]


def test_the_settings_table_is_the_declarations() -> None:
    table = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(CEP_\w+)` \| (.*?) \| (.*) \|$", table, re.M)
    assert rows == documented()


def test_no_module_reads_a_cep_variable_itself() -> None:
    readers = []
    for package in ("cpl", "operators", "stores", "deployer", "migrations"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if path.name != "settings.py" and re.search(r"environ(\.get)?\(?\[?[\"']CEP_", text):
                readers.append(str(path.relative_to(ROOT)))
    assert readers == []


def test_values_are_typed_and_defaults_apply() -> None:
    s = current(
        {
            "CEP_MAX_QUERIES": "3",
            "CEP_COUNT_FILTERED": "off",
            "CEP_STOP_TIMEOUT": " 2.5 ",
            "CEP_SPARK_BIND": "",
        }
    )
    assert (s.max_queries, s.count_filtered, s.stop_timeout_s, s.spark_bind) == (3, False, 2.5, "127.0.0.1")
    assert s.advertised_host == "127.0.0.1"
    assert current({}) == Settings()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CEP_STOP_TIMEOUT": "soon"}, "CEP_STOP_TIMEOUT='soon' is not a number"),
        ({"CEP_STORE_RETRIES": "0"}, "CEP_STORE_RETRIES=0 must be at least 1"),
        ({"CEP_MAX_QUERIES": "2.5"}, "CEP_MAX_QUERIES='2.5' is not an integer"),
        ({"CEP_COUNT_FILTERED": "maybe"}, "CEP_COUNT_FILTERED='maybe' is not a yes/no value"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_value(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        current(env)
