"""Hadoop's local file system without a process per file: deployer/spark/hadoop/java's
`NioLocalFileSystem`, shipped built (`paascep-hadoop.jar`, made by `make jars`: deployer/spark/jvm).

Spark writes a query's checkpoint (its offset and commit logs, its state stores' files) through
Hadoop's FileSystem API. On the local disk, without Hadoop's native library (PySpark's jars have
none), every file and directory that creates forks a `chmod` to set its permission: ~4.5 ms each
(docs/architecture.md, "What a run costs on Spark"), 46 when a query of two merged streams starts, 4
in every stateless micro-batch and more in a stateful one. The class sets the same bits through
java.nio. It is put on the class path of a JVM with a local master only, whose executors are that
JVM: a cluster's executors run elsewhere, where the jar is not, and keep Hadoop's own class.
CEP_NIO_LOCAL_FS=0 turns it off.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from deployer import settings
from deployer.spark import jvm

HERE = Path(__file__).resolve().parent
JAR = HERE / "paascep-hadoop.jar"
SOURCE = HERE / "java" / "paascep" / "hadoop" / "NioLocalFileSystem.java"
CLASS = "paascep.hadoop.NioLocalFileSystem"
_FILE_IMPL = "spark.hadoop.fs.file.impl"

log = logging.getLogger("paascep.spark")


def source_digest() -> str:
    return jvm.source_digest([SOURCE])


def built_from() -> str | None:
    """The digest of the source the jar was built from; None without a jar or the digest."""
    return jvm.built_from(JAR)


def used(master: str) -> bool:
    """Whether a JVM with `master` gets the class: a local master, CEP_NIO_LOCAL_FS on, the jar there."""
    return master.startswith("local") and settings.current().nio_local_fs and JAR.is_file()


def conf(master: str) -> dict[str, str]:
    """The JVM's setting that puts the class in place of Hadoop's for `file:` paths (static: given at
    the JVM's start), with the jar on its class path (`class_path`); none when it is not `used`."""
    return {_FILE_IMPL: CLASS} if used(master) else {}


def class_path(master: str) -> list[Path]:
    """The jar, for the driver's class path (deployer.spark.run.class_path), when it is `used`."""
    return [JAR] if used(master) else []


def loadable(options: dict[str, str], jvm: Any) -> dict[str, str]:
    """`options` without the class for `file:` if the started JVM (`jvm`, before its context is
    made) cannot load it: a class path of the user's own (`--driver-class-path` in
    PYSPARK_SUBMIT_ARGS, `spark.driver.extraClassPath` in spark-defaults.conf) replaces the one
    `conf` gives, and Hadoop would then fail every `file:` path. Hadoop's own class is kept, said on
    stderr (a warning of the `paascep.spark` logger)."""
    if options.get(_FILE_IMPL) != CLASS or jvm is None:
        return options
    try:
        jvm.java.lang.Class.forName(CLASS)
    except Exception:  # py4j's error for the JVM's ClassNotFoundException
        log.warning(
            "%s is not on the JVM's class path (a driver class path of your own?): checkpoint files "
            "are written by Hadoop's own local file system, a `chmod` process each",
            CLASS,
        )
        jvm.java.lang.System.clearProperty(_FILE_IMPL)  # spark-submit's, which the context reads
        return {k: v for k, v in options.items() if k != _FILE_IMPL}
    return options


def class_path_key(master: str) -> str:
    """What the jar adds to the JVM's class path, for the name of a class archive made with it
    (deployer.spark.run.jvm_archive): a JVM with another class path cannot map that archive."""
    return f"{JAR}:{built_from()}" if used(master) else ""
