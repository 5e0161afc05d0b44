"""Build the project's jars from their sources (`make jars`; needs a JDK's `javac`, 17 or later):
deployer/spark/hadoop's and deployer/spark/functions'. See deployer/spark/jvm."""

from __future__ import annotations

import sys
from pathlib import Path

import pyspark

from deployer.spark import functions, hadoop, jvm

JARS = [([hadoop.SOURCE], hadoop.JAR), (functions.SOURCES, functions.JAR)]


def main() -> None:
    spark_jars = Path(pyspark.__file__).resolve().parent / "jars"
    root = Path(__file__).resolve().parents[2]
    for sources, jar in JARS:
        try:
            n = jvm.build(sources, jar, spark_jars)
        except FileNotFoundError as err:
            sys.exit(str(err))
        print(f"{jar.relative_to(root)}: {n} classes")


if __name__ == "__main__":
    main()
