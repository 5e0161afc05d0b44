"""The project's jars on the driver JVM's class path (deployer/spark/jvm), set when the JVM starts.

- Hadoop's local file system without a `chmod` per file, with a local master (deployer/spark/hadoop);
- the functions the translation calls (deployer/spark/functions), always: a task sends its metrics
  back to the driver, and an observed count whose condition holds one of them (a WHERE that writes a
  double as text) comes back holding the function, which the driver must load with Spark's own class
  loader. The jar added to a context at run time (what reaches a cluster's executors) is seen by
  the class loader of added jars only: such a batch failed with "cannot assign instance of
  SerializedLambda to field ScalaUDF.f" (the differential fuzzer's test, seed 101).
"""

from __future__ import annotations

import os

from deployer.spark import functions, hadoop, jvm


def conf(master: str) -> dict[str, str]:
    """The JVM's settings for the project's jars with `master` (static: given at the JVM's start)."""
    jars = [*hadoop.class_path(master), functions.JAR]
    return {"spark.driver.extraClassPath": os.pathsep.join(map(str, jars)), **hadoop.conf(master)}


def key(master: str) -> str:
    """What the jars add to the JVM's class path, for the name of a class archive made with them
    (deployer.spark.run.jvm_archive): a JVM with another class path cannot map that archive."""
    return f"{hadoop.class_path_key(master)}|{functions.JAR}:{jvm.built_from(functions.JAR)}"
