"""Spark's lookup of installed Python data sources, skipped: `cep` registers the ones it reads.

The first registration of a Python data source in a JVM (every `cep` source is one: files, Redis
streams, triggers) first looks up the data sources installed as `pyspark_*` packages, in a Python
process of its own that imports PySpark and walks every entry of the Python path: 0.25-0.45 s of
each `cep` process's building, with nothing else to do meanwhile (ad hoc, `cep run --until-idle` of
examples/daily_bill.cpl). Started in a thread beside the session's other start-up work, it saved
nothing: the first registration comes 0.1 s after the session, and waited for it. `cep` reads only
its own sources, by their own names, so the
lookup's result is set to "none installed" before it runs: Spark's `DataSourceManager` keeps it in
a variable that is public in the JVM (Spark's own tests set it). A Spark without that variable
looks them up as before.
"""

from __future__ import annotations

import logging

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def skip_data_source_lookup(spark: SparkSession) -> None:
    """Record in `spark`'s JVM that no Python data source is installed, unless it looked them up already."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        manager = getattr(
            getattr(jvm.org.apache.spark.sql.execution.datasources, "DataSourceManager$"), "MODULE$"
        )
        if manager.dataSourceBuilders().isEmpty():
            none = getattr(getattr(jvm.scala.collection.immutable, "Map$"), "MODULE$").empty()
            getattr(manager, "dataSourceBuilders_$eq")(jvm.scala.Some(none))
    except Py4JError as err:  # another Spark: its first registration looks them up
        log.debug("Spark's lookup of installed Python data sources stays: %s", err)
