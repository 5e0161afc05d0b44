"""Functions of the project's own that Spark's JVM runs, which the translation calls: java/'s
classes, shipped built in `paascep-functions.jar` (made by `make jars`: deployer/spark/jvm).

- `cep_double_text` (`paascep.functions.DoubleText`): a double's text as the reference executor
  writes it, Python's repr: the shortest digits that read back as the same double. Spark's own text
  of a double is Java 17's `Double.toString`, which is sometimes a digit longer or not the closest
  (9.2233720347072922E18 for 9.223372034707292e+18; found by the differential fuzzer, seeds 7955
  and 1535). Not `java_method` on a JDK class: Spark takes a reflective call as nondeterministic
  and refuses it in a join's condition, and it fails on NULL.
- `cep_double_round` (`paascep.functions.DoubleRound`): round(x, digits) of a double as the
  reference rounds it, its shortest digits rounded half away from zero; Spark's rounds Java 17's
  digits (`round(4.32989882904645e+16, -3)` is 4.3298988290465e+16; Spark rounded
  4.3298988290464496E16 to 4.3298988290464e+16).

A function's column holds the function itself, not its name: a streaming query analyses its
micro-batches in a copy of its session made when it starts, and a plan built inside a batch (a
shared query's sinks, split on the driver) is analysed there, where a function registered by name
after that copy is unknown. The jar is on the driver's class path (deployer.spark.run.class_path),
and added to the context the first time a query needs one of its functions (`column`; most scripts
never write a double as text): its executors fetch it, on a cluster too.
"""

from __future__ import annotations

import logging
import threading
import weakref
from pathlib import Path
from typing import Any

from pyspark import SparkContext
from pyspark.sql import Column
from pyspark.sql.classic.column import _to_java_column, _to_seq

HERE = Path(__file__).resolve().parent
JAR = HERE / "paascep-functions.jar"
SOURCES = [HERE / "java" / "paascep" / "functions" / f"{c}.java" for c in ("DoubleText", "DoubleRound")]
DOUBLE_TEXT = "cep_double_text"
DOUBLE_ROUND = "cep_double_round"
# each with a static `function()`
_CLASSES = {DOUBLE_TEXT: "paascep.functions.DoubleText", DOUBLE_ROUND: "paascep.functions.DoubleRound"}

# per context: each function's JVM UserDefinedFunction, made once
_made: weakref.WeakKeyDictionary[SparkContext, dict[str, Any]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # deployments of `cep serve` are translated side by side
log = logging.getLogger("paascep.spark")


def column(name: str, *args: Column) -> Column:
    """The project's function `name` (DOUBLE_TEXT, DOUBLE_ROUND) of `args`, in the active context."""
    sc = SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError(f"{name}: no Spark context is active")
    with _lock:
        made = _made.setdefault(sc, {})
        if name not in made:
            made[name] = _udf(sc, name)
    return Column(made[name].apply(_to_seq(sc, [_to_java_column(a) for a in args])))


def _udf(sc: SparkContext, name: str) -> Any:
    """The JVM's UserDefinedFunction of `name` in `sc`, its jar added to `sc` first."""
    jvm: Any = sc._jvm
    context = sc._jsc.sc()
    jars = getattr(jvm, "scala.jdk.javaapi.CollectionConverters").asJava(
        context.listJars()
    )  # as PySpark's listFiles
    if not any(str(j).endswith("/" + JAR.name) for j in jars):
        context.addJar(str(JAR))  # its executors fetch it before their next task
    made = _class(jvm, _CLASSES[name])
    gateway: Any = sc._gateway
    no_types, no_args = gateway.new_array(jvm.java.lang.Class, 0), gateway.new_array(jvm.java.lang.Object, 0)
    # the class's own `function()`: py4j would pick Spark's untyped `udf(Object, DataType)`; named,
    # so that Spark's plans (a query's explain(), its UI, its errors) say `cep_double_text(x)`, not `UDF(x)`
    return made.getMethod("function", no_types).invoke(None, no_args).withName(name)


def _class(jvm: Any, name: str) -> Any:
    """The class `name` from the driver's class path (deployer.spark.run.class_path puts the jar
    there), else from the jar added to the context's class loader of added jars, said on stderr."""
    try:
        return jvm.java.lang.Class.forName(name)
    except Exception:  # py4j's error for the JVM's ClassNotFoundException
        log.warning(
            "%s is not on the driver's class path (a --driver-class-path of your own?): add %s to it, "
            "else a batch whose observed counts hold the function fails",
            name,
            JAR,
        )
    loader = jvm.org.apache.spark.sql.classic.SparkSession.active().sharedState().jarClassLoader()
    url = jvm.java.io.File(str(JAR)).toURI().toURL()
    if not any(u.equals(url) for u in loader.getURLs()):
        loader.addURL(url)
    return jvm.java.lang.Class.forName(name, True, loader)
