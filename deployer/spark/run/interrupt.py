"""A foreachBatch writer whose micro-batch is cut short by its query's stop fails in a few lines.

Stopping a streaming query interrupts the Spark job its foreachBatch writer is waiting for; py4j
raises that in the writer as a Py4JJavaError whose text holds the whole Java stack trace (10 KB and
more), and Spark gets it back as the text of the Python traceback. Spark then decides whether the
batch failed or was interrupted by the stop (StreamExecution.isInterruptionException) with a regular
expression run over that text, `py4j.protocol.Py4JJavaError: An error occurred while calling
((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|...)`, whose matcher recurses once per character:
on such a text it overflows the thread's stack, and the query's thread dies printing a
StackOverflowError and a thousand lines of stack (every stop of a busy query in `cep serve`; a `cep
run` stop that outlasts CEP_STOP_TIMEOUT). So the writer raises the interruption again as the two
lines that test reads, without the stack trace: Spark sees the stop, and the query ends quietly.

A failure that is not an interruption keeps its whole text: Spark only runs that test on a query
being stopped, and the run's error message is taken from it (deployer.spark.run.deployment.root_cause).
"""

from __future__ import annotations

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame

from deployer.spark.streams.sinks import Writer

# What Spark takes for an interruption (StreamExecution.IO_EXCEPTION_NAMES), and the SparkException
# of a job cancelled with its query's job group (its text names the query's run id).
_INTERRUPTED = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
_CANCELLED = "org.apache.spark.SparkException"


class BatchInterrupted(RuntimeError):
    """A micro-batch's Spark job interrupted or cancelled: the first lines of the Py4JJavaError."""


def interruption(err: Py4JJavaError) -> str | None:
    """The lines of `err` that tell Spark it is an interruption, or None if it is not one: its first
    line, and the Java exception, or the exception it was caused by, that is one (a job waited for
    through another thread, as `toLocalIterator` does, fails with the cancellation as its cause)."""
    lines = str(err).splitlines()
    for line in lines[1:]:
        java = line.removeprefix(": ").removeprefix("Caused by: ")
        if java == line:
            continue  # a line of a stack trace
        if java.split(":", 1)[0].strip() in _INTERRUPTED or (
            java.startswith(_CANCELLED) and "cancelled" in java
        ):
            return f"py4j.protocol.Py4JJavaError: {lines[0]}\n: {java}"
    return None


def interruptible(writer: Writer) -> Writer:
    """`writer`, raising an interruption of its Spark job as BatchInterrupted (see the module),
    whether the Py4JJavaError reaches it or caused the error that does."""

    def write(df: DataFrame, batch_id: int) -> None:
        try:
            writer(df, batch_id)
        except Exception as err:
            cause: BaseException | None = err
            while cause is not None and not isinstance(cause, Py4JJavaError):
                cause = cause.__cause__ or cause.__context__
            short = interruption(cause) if cause is not None else None
            if short is None:
                raise
            raise BatchInterrupted(short) from None

    return write
