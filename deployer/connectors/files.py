"""Files as sources and sinks: directories of JSON-lines/CSV files, stdin, the console.

Reading. A `file:DIR` source reads `*.jsonl`, `*.json` and `*.csv` files in name order, skipping
names that start with `_` or `.` (Spark's `_spark_metadata`, editors' temporaries). A file is read
once, when first seen; writers should move finished files into the directory. `.jsonl` files and
`.json` files hold one JSON object per line (a `.json` file may instead hold one JSON array of
objects). CSV files have a header row naming the fields; an empty CSV cell is NULL except for
string fields, and quoted fields may not span lines. `-` reads JSON lines from stdin.

Records are converted to events by deployer.connectors.records.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import TextIO

from deployer.connectors.records import EMPTY_CELL, RawRecord, json_record, python_reason

EXTENSIONS = (".jsonl", ".json", ".csv")

# ---- URIs ------------------------------------------------------------------------------------------


def file_dir(uri: str) -> Path | None:
    """The directory of a `file:DIR` (or `file://DIR`) URI, else None."""
    if uri.startswith("file:"):
        rest = uri[len("file:") :]
        return Path(rest[2:] if rest.startswith("//") else rest)
    return None


# ---- reading -----------------------------------------------------------------------------------------


def list_files(directory: Path) -> list[Path]:
    """Input files of a source directory, in name order."""
    if not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and p.suffix.lower() in EXTENSIONS and not p.name.startswith(("_", "."))
    )


def read_file(path: Path, shown: Path | None = None) -> Iterator[RawRecord]:
    """The records of one file; each says where it came from as `shown:LINE` (the file's path as the
    user named its directory; `path` itself by default)."""
    shown = shown or path
    if path.suffix.lower() == ".csv":
        yield from _read_csv(path, shown)
        return
    with path.open(encoding="utf-8", errors="replace") as f:
        if path.suffix.lower() == ".json":
            head = f.read(4096)
            f.seek(0)
            if head.lstrip().startswith("["):
                yield from _read_json_array(f, shown)
                return
        yield from read_json_lines(f, str(shown))


def read_json_lines(f: TextIO, name: str) -> Iterator[RawRecord]:
    for n, line in enumerate(f, start=1):
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        yield json_record(text, f"{name}:{n}")


def _read_json_array(f: TextIO, path: Path) -> Iterator[RawRecord]:
    text = f.read()
    try:
        items = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as err:
        yield RawRecord(text[:1000], f"{path}:{err.lineno}", None, f"malformed JSON: {err.msg}")
        return
    except (ValueError, RecursionError) as err:  # see _json_record
        yield RawRecord(text[:1000], f"{path}:1", None, f"unreadable JSON: {python_reason(err)}")
        return
    for n, item in enumerate(items, start=1):
        raw = json.dumps(item, default=str)
        if isinstance(item, dict):
            yield RawRecord(raw, f"{path}:item {n}", item)
        else:
            yield RawRecord(raw, f"{path}:item {n}", None, "a record must be a JSON object")


def _read_csv(path: Path, shown: Path) -> Iterator[RawRecord]:
    with path.open(encoding="utf-8", errors="replace", newline="") as f:
        header: list[str] | None = None
        for n, line in enumerate(f, start=1):
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            cells = next(csv.reader([text]))
            if header is None:
                header = [c.strip() for c in cells]
                continue
            if len(cells) != len(header):
                yield RawRecord(
                    text, f"{shown}:{n}", None, f"expected {len(header)} CSV columns, got {len(cells)}"
                )
                continue
            # Empty cells are NULL (marked so that string fields can read them as '').
            yield RawRecord(
                text,
                f"{shown}:{n}",
                {h: (c if c != "" else EMPTY_CELL) for h, c in zip(header, cells, strict=True)},
            )


class LineWriter:
    """Appends lines to a file created on first use, flushing on request (not per line)."""

    def __init__(self, path: Path | None, stream: TextIO | None = None):
        self.path = path
        self.stream = stream
        self.opened: TextIO | None = None

    def write(self, line: str) -> None:
        if self.opened is None:
            if self.stream is not None:
                self.opened = self.stream
            else:
                assert self.path is not None
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.opened = self.path.open("a", encoding="utf-8")
        self.opened.write(line + "\n")

    def flush(self) -> None:
        if self.opened is not None:
            self.opened.flush()

    def close(self) -> None:
        if self.opened is not None and self.opened is not self.stream:
            self.opened.close()
        elif self.opened is not None:
            self.opened.flush()
        self.opened = None


def console() -> TextIO:
    return sys.stdout
