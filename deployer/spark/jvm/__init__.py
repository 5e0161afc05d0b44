"""The project's own Java classes: each jar is committed built, with the digest of its sources.

A machine with only a Java runtime (no `javac`) must run the project, so the jars of
deployer/spark/hadoop and deployer/spark/functions are committed; `build` remakes one from its
`java/` folder (`make jars`, a JDK 17 or later), and its manifest records the sha256 of the sources it
was built from, which the tests compare with the sources (a jar not rebuilt after its source changed
fails them). Its entries carry a fixed date, so that the same sources and javac give the same bytes.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

DIGEST_HEADER = "Source-Digest"  # in a jar's manifest: the sha256 of the sources it was built from
_DATE = (2026, 1, 1, 0, 0, 0)


def source_digest(sources: Sequence[Path]) -> str:
    """The sha256 of `sources`' bytes, in the order given (one file: the file's own sha256)."""
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def built_from(jar: Path) -> str | None:
    """The digest of the sources `jar` was built from (its manifest's DIGEST_HEADER); None without
    a jar or the header."""
    try:
        with zipfile.ZipFile(jar) as archive:
            manifest = archive.read("META-INF/MANIFEST.MF").decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    for line in manifest.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == DIGEST_HEADER:
            return value.strip()
    return None


def build(sources: Sequence[Path], jar: Path, class_path: Path) -> int:
    """Compile `sources` for Java 17 against the jars in `class_path` into `jar` (replaced), with
    their digest in its manifest; the number of classes. Raises FileNotFoundError without javac."""
    javac = shutil.which("javac")
    if javac is None:
        raise FileNotFoundError("javac not found: building a jar needs a JDK (17 or later)")
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [javac, "--release", "17", "-cp", f"{class_path}/*", "-d", out, *map(str, sources)],
            check=True,
        )
        classes = sorted(Path(out).rglob("*.class"))
        manifest = f"Manifest-Version: 1.0\n{DIGEST_HEADER}: {source_digest(sources)}\n"
        with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _DATE), manifest)
            for path in classes:
                info = zipfile.ZipInfo(path.relative_to(out).as_posix(), _DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    return len(classes)
