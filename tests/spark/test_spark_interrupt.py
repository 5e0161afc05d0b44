"""A foreachBatch writer cut short by its query's stop (deployer.spark.run.interrupt), on a real Spark.

In a process of its own, so that the JVM's standard error can be read: without the compact
interruption, Spark's check of the writer's error overflows the stream thread's stack and the JVM
prints `Exception in thread "stream execution thread ..." java.lang.StackOverflowError` and a
thousand lines of stack on every such stop (seen on Spark 4.3 with PySpark's own foreachBatch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCRIPT = r"""
import json, sys, tempfile, threading, time
from deployer.spark.run.interrupt import BatchInterrupted, interruptible
from deployer.spark.run.session import spark_session

spark = spark_session("local[2]", "interrupt-test")
raised = []

def long_job(df, batch_id):
    started.set()
    # a job that runs for minutes: the stop interrupts it
    spark.range(0, 10**12, numPartitions=2).write.format("noop").mode("overwrite").save()

def long_iteration(df, batch_id):
    started.set()
    # as the file and dead-letter writers read a batch: the job runs in another thread
    for row in spark.range(0, 10**12, numPartitions=2).toLocalIterator():
        pass

def wrapped(df, batch_id):
    try:
        long_job(df, batch_id)
    except Exception as err:
        raise RuntimeError("the sink could not be written") from err

def recorded(writer):
    def write(df, batch_id):
        try:
            writer(df, batch_id)
        except BaseException as err:
            raised.append((type(err).__name__, len(str(err))))
            raise
    return write

def failing(df, batch_id):
    spark._jvm.java.lang.Integer.parseInt("not a number")  # a Py4JJavaError, not an interruption

stops = []
for job in (long_job, long_iteration, wrapped):
    started = threading.Event()
    source = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
    q = source.writeStream.foreachBatch(recorded(interruptible(job))).option(
        "checkpointLocation", tempfile.mkdtemp()).start()
    assert started.wait(120), "the writer never ran"
    time.sleep(1)  # the job is running
    q.stop()
    stops.append(q.exception() is None)

source = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
q = source.writeStream.foreachBatch(recorded(interruptible(failing))).option(
    "checkpointLocation", tempfile.mkdtemp()).start()
try:
    q.awaitTermination(120)
except Exception:
    pass
failure = str(q.exception())
print("RESULT " + json.dumps({"stops": stops, "raised": raised, "failure": failure}), flush=True)
spark.stop()
"""


def test_a_stop_interrupting_a_writer_ends_the_query_quietly_and_failures_keep_their_text(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "SPARK_LOCAL_DIRS": str(tmp_path / "spark-local"),
        "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false pyspark-shell",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert "StackOverflowError" not in output, output[-3000:]
    # Spark took the three stops for what they were (a job the writer runs, a job it reads through
    # toLocalIterator, a job whose error the writer wraps in its own): no query failed.
    assert result["stops"] == [True, True, True]
    kinds = [kind for kind, _ in result["raised"]]
    assert kinds[:3] == ["BatchInterrupted"] * 3
    assert all(size < 1000 for _, size in result["raised"][:3])
    # A failure that is not an interruption is left as it was raised: the query fails with it.
    assert kinds[3] == "NumberFormatException"  # as pyspark converts it
    assert 'NumberFormatException: For input string: "not a number"' in result["failure"], result["failure"]
