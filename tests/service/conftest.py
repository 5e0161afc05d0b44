"""Catalog fixtures: each test gets a fresh catalog, SQLite and (marked postgres) PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the default catalog and checkpoints out of the working tree."""
    d = tmp_path / "cep-data"
    monkeypatch.setenv("CEP_DATA_DIR", str(d))
    monkeypatch.delenv("CEP_CATALOG_URL", raising=False)
    return d


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A catalog that exists but is not migrated yet."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.sqlite3'}"
    return str(request.getfixturevalue("pg_db"))
