"""How a failed query's error is told (deployer.spark.run.progress.root_cause), without a JVM: the data
store's message inside the Python traceback Spark wraps it in, whole and in one line, so that a run
on Spark stops with the words the reference executor stops with (deployer.engine.one_line)."""

from __future__ import annotations

from deployer.spark.run.progress import root_cause

# What Spark's StreamingQueryException says when a batch's writer (or a worker) raised a store error:
# the Python traceback, then a blank line and the query's description, or Spark's SQLSTATE of a Python
# error (38000) and the JVM's frames.
DRIVER = """org.apache.spark.api.python.PythonException: An exception was raised by the Python Proxy.
Traceback (most recent call last):
  File "/x/deployer/spark/datastores/materialize.py", line 54, in write
    result = worker_stores(config).materialize_arrow(
stores.errors.StoreSchemaError: store crm (sqlite:///crm.db): table seen already exists with a different definition:
  existing: (k integer, note text) PRIMARY KEY (k)
  declared: (k integer, idcaller integer) PRIMARY KEY (k)
drop or rename the existing table, or change the CREATE TABLE to match it

=== Streaming Query ===
Identifier: cep:table:seen
"""
WORKER = """Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/deployer/spark/datastores/sql.py", line 150, in run
stores.errors.StoreQueryError: store crm (postgresql://app:***@db/crm): query plan_of: relation "plans" does not exist
 SQLSTATE: 38000
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:600)
"""


def test_a_store_error_is_the_root_cause_with_all_its_lines_in_one() -> None:
    assert root_cause(DRIVER) == (
        "store crm (sqlite:///crm.db): table seen already exists with a different definition: "
        "existing: (k integer, note text) PRIMARY KEY (k) "
        "declared: (k integer, idcaller integer) PRIMARY KEY (k) "
        "drop or rename the existing table, or change the CREATE TABLE to match it"
    )
    # psycopg's hint after a refused connection, indented with a tab
    refused = (
        "stores.errors.StoreConnectError: store crm (postgresql://db/crm): connection failed: connection to"
        ' server at "127.0.0.1", port 5432 failed: Connection refused\n'
        "\tIs the server running on that host and accepting TCP/IP connections?\n"
        "\tat org.apache.spark.api.python.PythonRunner\n"
    )
    assert root_cause(refused) == (
        'store crm (postgresql://db/crm): connection failed: connection to server at "127.0.0.1", port 5432'
        " failed: Connection refused Is the server running on that host and accepting TCP/IP connections?"
    )
    assert (
        root_cause(WORKER)
        == 'store crm (postgresql://app:***@db/crm): query plan_of: relation "plans" does not exist'
    )


def test_the_last_store_error_wins_and_other_errors_keep_their_name() -> None:
    chained = "stores.errors.StoreQueryError: first\nstores.errors.StoreConnectError: second\n\n"
    assert root_cause(chained) == "second"
    assert root_cause("Traceback\nValueError: bad value\n") == "ValueError: bad value"
    assert root_cause("") == "unknown error"
