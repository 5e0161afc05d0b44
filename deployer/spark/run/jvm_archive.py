"""A class-data sharing archive of Spark's classes for the JVM of a bounded `cep run`.

Every JVM `cep run` starts loads and verifies the same ~15,000 classes of Spark, Hadoop and their
libraries before it does anything. A dynamic CDS archive (JDK 13+, `-XX:ArchiveClassesAtExit`) keeps
those classes as a JVM holds them after loading; a JVM started with `-XX:SharedArchiveFile` maps them
instead (docs/settings.md, "The JVM of a bounded run", has the figures).

The first bounded run on a machine (per JDK, PySpark and its installation, and JVM options: the
archive's name holds a digest of them) makes it: its JVM writes the archive as it exits, which the run waits for after its
summary (`finish`), into a file of its own renamed into place once complete, so that a run reading
the cache never sees half an archive and two first runs at once do not collide. Later runs map it.
Each installation, JDK or set of options gets an archive of its own (~180 MB), so the cache keeps
the `KEPT` most recently used ones (a run that maps one marks it used) and drops the others, and the
files of a maker that died, when a new one is put in place (`pruned`). An archive dropped while a
JVM maps it stays mapped; a run that finds it gone makes it again.
A JVM that cannot use it (another JDK, another class path) ignores it silently (`-Xshare:auto`, the
default, with the CDS log off). Nothing here ever fails a run: without an archive it runs as before.

Options of the user's own that already name an archive (SPARK_SUBMIT_OPTS, JAVA_TOOL_OPTIONS,
JDK_JAVA_OPTIONS; the tests' JVMs have one: tests/jvm_archive.py) are left alone: a JVM may map one
dynamic archive only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from deployer import settings

USE = "-XX:SharedArchiveFile={} -Xlog:cds=off,cds+dynamic=off"
MAKE = "-XX:ArchiveClassesAtExit={} -Xlog:cds=off,cds+dynamic=off"
_CDS_OPTIONS = ("SharedArchiveFile", "ArchiveClassesAtExit", "Xshare:off")
_USERS_OPTIONS = ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")
# How long a run waits, after its summary, for its JVM to write the archive (a few seconds).
_WRITE_WAIT_S = 120.0
# Archives kept in the cache, the most recently used: a machine's few virtualenvs and JDKs each map
# theirs, where every one ever made stayed before (1.4 GB after a day of remade virtualenvs).
KEPT = 4
# A maker's file older than this is one whose run died before putting it in place.
_STALE_PARTIAL_S = 24 * 3600.0


@dataclass(frozen=True)
class Archive:
    """The JVM options of one run, and the archive it writes as it exits (None: it writes none)."""

    options: str
    making: Path | None = None
    path: Path | None = None


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/paascep/jvm, by default ~/.cache/paascep/jvm."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "paascep" / "jvm"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_name(base_options: str, class_path: str = "") -> str | None:
    """The archive's file name for this JDK, PySpark, JVM options and `class_path` (what the project
    adds to Spark's: deployer.spark.hadoop.class_path_key); None without Java."""
    java = _java()
    if java is None:
        return None
    import pyspark

    stat = java.stat()
    key = f"{java}:{stat.st_size}:{stat.st_mtime_ns}:{pyspark.__version__}:{pyspark.__file__}:{base_options}"
    # PySpark installed again where it was (a virtualenv made anew) has jars of other times, and a
    # JVM refuses an archive made with other jars, silently: every run then started without one.
    with contextlib.suppress(OSError):
        key += f":{(Path(pyspark.__file__).parent / 'jars').stat().st_mtime_ns}"
    if class_path:  # (none: the name archives made before the project added any had)
        key += f":{class_path}"
    return f"spark-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def archive_path(base_options: str, class_path: str = "") -> Path | None:
    """Where the archive for this JDK, PySpark, JVM options and `class_path` is (made or not); None
    without Java."""
    name = archive_name(base_options, class_path)
    return None if name is None else cache_dir() / name


def options(base_options: str, class_path: str = "") -> Archive:
    """`base_options` with the archive's: mapped if made, else made by this run's JVM as it exits;
    `base_options` alone when the archive is off (CEP_JVM_ARCHIVE=0), the user's options name one, or
    the cache cannot be written."""
    if not settings.current().jvm_archive or any(
        flag in os.environ.get(var, "") for var in _USERS_OPTIONS for flag in _CDS_OPTIONS
    ):
        return Archive(base_options)
    path = archive_path(base_options, class_path)
    if path is None:
        return Archive(base_options)
    if path.exists():
        with contextlib.suppress(OSError):  # used now: the last the cache drops (`pruned`)
            os.utime(path)
        return Archive(f"{base_options} {USE.format(path)}".strip())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Archive(base_options)
    making = path.with_name(f".{path.stem}-{os.getpid()}.partial")
    return Archive(f"{base_options} {MAKE.format(making)}".strip(), making, path)


def finish(archive: Archive, jvm: subprocess.Popen[bytes] | None) -> None:
    """After the session has stopped: if this run's JVM writes the archive, let it exit (its input
    closed is the end of its driver for it), wait for it, and put a complete archive in place."""
    if archive.making is None or archive.path is None or jvm is None:
        return
    try:
        if jvm.stdin is not None:
            jvm.stdin.close()
        ok = jvm.wait(_WRITE_WAIT_S) == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    with contextlib.suppress(OSError):
        if ok and archive.making.stat().st_size > 0:
            os.replace(archive.making, archive.path)
            pruned(archive.path.parent)
    archive.making.unlink(missing_ok=True)


def pruned(directory: Path, now: float | None = None) -> list[Path]:
    """Drop from the cache `directory` all but the `KEPT` most recently used archives, and makers'
    files a day old; the files dropped. Another file there is not the cache's, and stays."""
    now = time.time() if now is None else now
    dropped = []
    with contextlib.suppress(OSError):
        archives = sorted(directory.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
        stale = [p for p in directory.glob(".spark-*.partial") if now - p.stat().st_mtime > _STALE_PARTIAL_S]
        for path in [*archives[KEPT:], *stale]:
            with contextlib.suppress(OSError):
                path.unlink()
                dropped.append(path)
    return dropped
