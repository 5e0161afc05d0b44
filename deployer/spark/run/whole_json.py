"""A checkpoint's own JSON files (its manifest, its records) written whole or not at all: a crash
mid-write must not leave half of one, which the next run could not read (no pyspark here)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_whole(path: Path, data: Any) -> None:
    """`data` as JSON into `path`: written beside it and synced, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
