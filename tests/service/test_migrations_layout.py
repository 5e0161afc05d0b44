"""The catalog's migrations as an Alembic project (migrations/, alembic.ini at the root): plain
`alembic` from the checkout and `cep db upgrade` migrate the same catalog with the same revisions,
into the same version table, from a checkout and from a wheel; a catalog migrated before the
migrations moved is at head."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from service_helpers import ok

from deployer.service import migrate
from deployer.service.catalog import Catalog
from deployer.service.models import VERSION_TABLE

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
OLD_LAYOUT = Path(__file__).with_name("catalog_0001_old_layout.sql")


def alembic(*args: str) -> str:
    """`alembic ARGS` run as a database person would: from the checkout's root, in a process."""
    done = subprocess.run(
        [str(BIN / "alembic"), *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def revisions(url: str) -> tuple[str | None, str]:
    cat = Catalog.open(url, migrated=False)
    try:
        return cat.revisions()
    finally:
        cat.close()


def head() -> str:
    return str(migrate.script_directory().get_current_head())


def test_the_checkout_is_an_alembic_project() -> None:
    assert (ROOT / "alembic.ini").is_file()
    assert migrate.script_location() == ROOT / "migrations"
    assert {p.name for p in (ROOT / "migrations").iterdir()} >= {"env.py", "script.py.mako", "versions"}
    assert not (ROOT / "deployer" / "service" / "migrations").exists()
    assert f"<base> -> {head()} (head)" in alembic("history")


def test_alembic_and_cep_migrate_one_catalog(catalog_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """$CEP_CATALOG_URL is the catalog of both, as `--catalog` would be."""
    monkeypatch.setenv("CEP_CATALOG_URL", catalog_url)
    assert f"Running upgrade  -> {head()}" in alembic("upgrade", "head")
    assert revisions(catalog_url) == (head(), head())
    assert f"{head()} (head)" in alembic("current")
    assert f"is up to date (revision {head()})" in ok("db", "upgrade")
    assert "no deployments" in ok("ls")
    # and back: the revisions go down and up the same way from either side
    alembic("downgrade", "base")
    assert revisions(catalog_url)[0] is None
    assert f"empty -> {head()}" in ok("db", "upgrade")
    assert "Running upgrade" not in alembic("upgrade", "head")


def test_alembic_finds_the_catalog_as_cep_does(tmp_path: Path, data_dir: Path) -> None:
    """-x catalog=URL, else $CEP_CATALOG_URL (unset here), else $CEP_DATA_DIR/catalog.sqlite3."""
    alembic("upgrade", "head")
    default = f"sqlite:///{data_dir.resolve() / 'catalog.sqlite3'}"
    assert revisions(default)[0] == head()
    assert f"is up to date (revision {head()})" in ok("db", "upgrade")
    other = f"sqlite:///{tmp_path / 'other.sqlite3'}"
    alembic("-x", f"catalog={other}", "upgrade", "head")
    assert revisions(other)[0] == head()
    with sqlite3.connect(tmp_path / "other.sqlite3") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert VERSION_TABLE in tables and "alembic_version" not in tables


def test_alembic_writes_the_sql_and_no_password(tmp_path: Path) -> None:
    """Offline (--sql): the PostgreSQL DDL, NOTIFY trigger included, with no server; the URL logged
    has its password hidden."""
    out = alembic("-x", "catalog=postgresql://cep:s3cret@db.invalid/cep", "upgrade", "head", "--sql")
    assert f"CREATE TABLE {VERSION_TABLE}" in out
    assert "CREATE TRIGGER deployments_notify_change" in out
    assert "postgresql://cep:***@db.invalid/cep" in out
    assert "s3cret" not in out


def test_a_catalog_migrated_before_the_move_is_at_head(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_LAYOUT.read_text(encoding="utf-8"))
    url = f"sqlite:///{path}"
    assert revisions(url) == (head(), head())
    assert f"is up to date (revision {head()})" in ok("db", "upgrade", catalog=url)
    assert "priced_calls" in ok("ls", catalog=url)
    out = alembic("-x", f"catalog={url}", "upgrade", "head")
    assert "Running upgrade" not in out
    assert f"{head()} (head)" in alembic("-x", f"catalog={url}", "current")


# -- from a wheel --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment outside the checkout with the wheel built from it installed; its
    dependencies are this environment's (a .pth line), so nothing is downloaded but the build's."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # the build writes build/ and *.egg-info beside its sources: not into the checkout
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("cpl", "operators", "stores", "deployer", "migrations"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(src)], check=True, timeout=600)
    (wheel,) = (tmp / "dist").glob("paascep-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(site) / "_deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], check=True
    )
    return venv


@pytest.mark.slow
def test_cep_db_upgrade_from_a_wheel(wheel_venv: Path, catalog_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CEP_CATALOG_URL")}

    def run(*cmd: str) -> str:
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    where = run(
        str(wheel_venv / "bin" / "python"),
        "-c",
        "import deployer.service.migrate as m; print(m.__file__); print(m.script_location())",
    ).split()
    site = str(wheel_venv / "lib")
    assert where[0].startswith(site) and where[1].startswith(site) and where[1].endswith("paascep_migrations")
    cep = str(wheel_venv / "bin" / "cep")
    assert f"empty -> {head()}" in run(cep, "db", "upgrade", "--catalog", catalog_url)
    assert f"is up to date (revision {head()})" in run(cep, "db", "upgrade", "--catalog", catalog_url)
    assert revisions(catalog_url) == (head(), head())
