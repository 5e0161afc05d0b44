"""The daemon of the Python workers a local `cep` JVM starts (`spark.python.daemon.module`): PySpark's
own (`pyspark.daemon`), which forks a worker for every Python task that finds none idle, after
importing what those workers' functions import.

A forked worker has its parent's modules already imported. PySpark's daemon imports PySpark's
worker only, so every new worker imported pandas, pyarrow and the project's modules that its
function's pickle names (the Sequencer, the stores for ReadSQL, the dead-letter spool ...): 0.5 to
1.1 s of CPU each on the machine of the README's figures, and a short run starts a few dozen
workers. The daemon imports them once. A module that fails to import here is left to the worker,
which then reports the error as it would have.
"""

from __future__ import annotations

import gc

PRELOADED = (
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.compute",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.streaming.stateful_processor_util",
    # the state server's messages, which a stateful processor's worker (and its state schema's
    # runner, at a query's start) imports at its first state call: protobuf, ~30 ms
    "pyspark.sql.streaming.proto.StateMessage_pb2",
    "pyspark.sql.streaming.stateful_processor_api_client",
    "deployer.spark.streams.file_source",
    "deployer.spark.streams.sequencer",
    "deployer.spark.streams.merge_sequencer",
    "deployer.spark.streams.spool",
    "deployer.spark.datastores.sql",
    # the stores a ReadSQL, UpdateSQL or materialization opens in its worker (stores/registry.py
    # imports them when one is first opened)
    "stores.sql.store",
    "stores.redis.store",
    "deployer.spark.windows.window_state",
    "deployer.spark.windows.tuple_buckets",
    "deployer.spark.patterns.processor",
)


if __name__ == "__main__":
    import cep_zygote

    cep_zygote.preload(PRELOADED)
    # the fresh processes' zygote (worker_path/cep_zygote.py): forked from here, with the JVM's
    # environment and these modules imported
    cep_zygote.start()
    from pyspark.daemon import manager

    # A reused worker calls gc.collect() after each task (pyspark.daemon), which walks every object
    # the process holds: with the modules above, ~130,000 objects and ~110 ms of CPU per task, most
    # of the workers' CPU in a micro-batch of a few hundred events (py-spy on a pattern test's
    # workers: 97 % of their samples). Frozen objects, those of this daemon that every worker
    # inherits, are left out of every collection: the workers' own garbage is still collected.
    gc.freeze()
    manager()
