"""The one line `cep status` shows for a deployment's failure (deployer.service.reports)."""

from __future__ import annotations

from deployer.service.reports import summarize_error

# How Spark reports a batch that failed in a Python worker, with PySpark's frames (the session's
# `simplifiedTraceback` is off) and Python's chain: the driver's error first, the store's made of it.
CHAINED = """org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown \
from the Python worker: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/worker.py", line 2100, in main
    process()
  File "/app/stores/sql/sqlite.py", line 120, in read
    rows = conn.execute(text, params).fetchall()
sqlite3.OperationalError: no such table: plans

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/app/stores/sql/sqlite.py", line 133, in read
    raise self._error(e, f"query {query.name}") from e
stores.errors.StoreQueryError: store crm (postgresql://cep:secret@db/crm): query plan_of: no such table: plans
 SQLSTATE: 38000.
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:600)
"""


def test_a_store_error_is_the_cause_shown_even_after_the_error_it_was_made_of() -> None:
    line = summarize_error(CHAINED)
    assert (
        line
        == "StoreQueryError: store crm (postgresql://cep:***@db/crm): query plan_of: no such table: plans"
    )


def test_otherwise_the_first_error_that_is_not_sparks_or_pythons_plumbing() -> None:
    text = CHAINED.replace("stores.errors.StoreQueryError", "RuntimeError")
    assert summarize_error(text) == "OperationalError: no such table: plans"
    assert (
        summarize_error("py4j.protocol.Py4JError: gone\nValueError: bad value 7\n")
        == "ValueError: bad value 7"
    )
