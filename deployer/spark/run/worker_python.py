"""The Python a local session's JVM starts its Python processes with: worker_path/cep_python.

Spark puts PySpark's zip, py4j's zip and its core jar at the head of the PYTHONPATH of every Python
process it starts, and an interpreter looks for its first module (`encodings`) there before its
standard library: each process read the three archives' directories as it started, ~27 ms of its
~58 ms (the jar's 5,973 entries), and a query's start runs several such processes one after the
other (its sources' runners, each stateful processor's state-schema runner). cep_python takes the
archives off PYTHONPATH and runs the interpreter PYSPARK_PYTHON named; worker_path/sitecustomize.py
puts them back at the end of the path, where an import reads them only if nothing before them had
its module. PySpark takes PYSPARK_PYTHON as each Python function is made, so it is this process's
environment that says it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# what every Python process of a local session has first on its path (session.launch_jvm)
WORKER_PATH = Path(__file__).resolve().parent / "worker_path"
PYTHON_LAUNCHER = WORKER_PATH / "cep_python"
# what cep_python runs: handed to it in the environment, not a setting (deployer/settings.py)
WORKER_PYTHON = "PAASCEP_WORKER_PYTHON"


def python_of_workers(master: str) -> bool:
    """Set PYSPARK_PYTHON for a session of `master`: cep_python for a local master, the interpreter
    it names otherwise (a cluster's executors have no such file) or where it cannot run. Whether
    the master is local."""
    local = master.startswith("local")
    named = os.environ.get("PYSPARK_PYTHON") or sys.executable
    if named == str(PYTHON_LAUNCHER):  # a session of this process made it so
        named = os.environ.get(WORKER_PYTHON) or sys.executable
    if local and os.access(PYTHON_LAUNCHER, os.X_OK) and os.access("/bin/sh", os.X_OK):
        os.environ[WORKER_PYTHON] = named
        os.environ["PYSPARK_PYTHON"] = str(PYTHON_LAUNCHER)
    else:
        os.environ["PYSPARK_PYTHON"] = named
    return local
