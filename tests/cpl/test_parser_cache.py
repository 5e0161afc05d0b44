"""The parser's tables come from the user's cache file after the first build (cpl.grammar): the same
parser, whether the file is there, cannot be written, or holds something else."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from cpl.grammar import built_parser

SCRIPT = "INSERT INTO o SELECT e1.k AS k FROM PATTERN EVERY e1=a[v > 5] -> e2=a[k = e1.k] WITHIN 1 MINUTE"


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "paascep" / "cpl"


def _loaded_from_cache(caplog: pytest.LogCaptureFixture) -> bool:
    return any("Loading grammar from cache" in r.getMessage() for r in caplog.records)


def test_the_second_parser_is_loaded_from_the_users_cache(
    cache_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="lark")
    first = built_parser(cached=True)
    files = list(cache_home.iterdir())
    assert len(files) == 1 and files[0].stat().st_size > 0
    assert stat.S_IMODE(cache_home.stat().st_mode) == 0o700  # the file is a pickle: the user's own
    assert not _loaded_from_cache(caplog)
    second = built_parser(cached=True)
    assert _loaded_from_cache(caplog)
    expected = built_parser(cached=False).parse(SCRIPT)
    assert first.parse(SCRIPT) == expected
    assert second.parse(SCRIPT) == expected


def test_a_damaged_cache_file_is_built_again(cache_home: Path, caplog: pytest.LogCaptureFixture) -> None:
    built_parser(cached=True)
    (file,) = cache_home.iterdir()
    file.write_bytes(file.read_bytes()[:1000])  # as a write cut short leaves it
    parser = built_parser(cached=True)
    assert parser.parse(SCRIPT) == built_parser(cached=False).parse(SCRIPT)
    caplog.set_level(logging.DEBUG, logger="lark")
    built_parser(cached=True)
    assert _loaded_from_cache(caplog)  # the damaged file was written again whole


def test_no_cache_where_none_can_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    parser = built_parser(cached=True)
    assert parser.parse(SCRIPT) == built_parser(cached=False).parse(SCRIPT)
    assert blocked.read_text() == "not a directory"
