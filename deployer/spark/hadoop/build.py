"""Build paascep-hadoop.jar from java/ (`make hadoop-jar`; needs a JDK's `javac`, 17 or later).

The jar is committed, so that a machine with only a Java runtime gets it; its manifest records the
sha256 of the source it was built from, which tests/spark/test_nio_local_fs.py compares with the
source. Its entries carry a fixed date, so that a rebuild of the same source by the same javac gives
the same bytes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pyspark

from deployer.spark.hadoop import DIGEST_HEADER, HERE, JAR, SOURCE, source_digest

_DATE = (2026, 1, 1, 0, 0, 0)


def build() -> None:
    javac = shutil.which("javac")
    if javac is None:
        sys.exit("javac not found: building the jar needs a JDK (17 or later)")
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [javac, "--release", "17", "-cp", f"{jars}/*", "-d", out, str(SOURCE)],
            check=True,
        )
        classes = sorted(Path(out).rglob("*.class"))
        manifest = f"Manifest-Version: 1.0\n{DIGEST_HEADER}: {source_digest()}\n"
        with zipfile.ZipFile(JAR, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _DATE), manifest)
            for path in classes:
                info = zipfile.ZipInfo(path.relative_to(out).as_posix(), _DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                jar.writestr(info, path.read_bytes())
    print(f"{JAR.relative_to(HERE.parents[2])}: {len(classes)} classes")


if __name__ == "__main__":
    build()
