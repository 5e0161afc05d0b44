"""Run by Python at the start of every Python process a local `cep` JVM starts (Spark's Python
workers, data source and state runners), because deployer.spark.run.session puts this directory on
their path: they import the installed, compiled PySpark rather than the zip Spark puts first.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` and py4j's zip at the head of its Python workers'
path, and Python keeps no compiled copy of a module it imports from a zip: each worker compiled
PySpark's modules again, and a short run starts a few dozen such processes (measured beside other
Spark jobs on 2 cores: the Python processes of a `cep run` of examples/daily_bill.cpl over 26
events took 24 s of CPU, 12 s with this). With PySpark installed from its wheel, SPARK_HOME is the
installed package itself, so its zips hold the very modules installed beside it: they are moved to
the end of the path. So is the jar of Spark's core that Spark puts first on the path too (for
builds that ship PySpark inside it; the wheel's has no Python file): a process's first import
that no module already imported answered read the jar's directory, 5,973 entries, ~22 ms, before
looking anywhere else. A process started through worker_path/cep_python has them already off its
PYTHONPATH, so that its interpreter's start reads none of them: they are put back, last, from
PAASCEP_SPARK_ARCHIVES. With any other SPARK_HOME (a Spark distribution) the path is left as it is.
A `sitecustomize` of the environment's own, further on the path (not in those archives), then
runs as it would have.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import PathFinder


def _installed_pyspark_first() -> list[str]:
    """Spark's archives moved to the end of the path (those worker_path/cep_python took off
    PYTHONPATH put back there); the archives, which hold no `sitecustomize`."""
    home = os.path.realpath(os.environ.get("SPARK_HOME") or "/nonexistent")
    archives = {os.path.join(home, "python", "lib"): ".zip", os.path.join(home, "jars"): ".jar"}
    taken_off = [p for p in os.environ.get("PAASCEP_SPARK_ARCHIVES", "").split(os.pathsep) if p]
    moved = [
        p for p in sys.path if archives.get(os.path.dirname(os.path.realpath(p))) == os.path.splitext(p)[1]
    ]
    installed = os.path.dirname(home)  # site-packages, when SPARK_HOME is the installed package
    on_path = any(os.path.realpath(p) == installed for p in sys.path if p)
    if moved and on_path and os.path.isfile(os.path.join(home, "__init__.py")):
        sys.path[:] = [p for p in sys.path if p not in moved] + moved
    sys.path.extend(p for p in taken_off if p not in sys.path)
    return [*moved, *taken_off]


def _next_sitecustomize(archives: list[str]) -> None:
    """Run the environment's own `sitecustomize`, if there is one further on the path. Not looked
    for in Spark's archives: looking reads an archive's whole directory (the jar's ~22 ms)."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here and p not in archives]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _forked_if_fresh() -> None:
    """A process Spark starts afresh for a query's start (worker_path/cep_zygote.py): run by the
    session's zygote instead, when there is one. Looked at before anything is imported for it."""
    argv = getattr(sys, "orig_argv", [])
    if len(argv) < 3 or argv[1] != "-m":
        return
    import cep_request  # the requester's end alone: what it imports, every such process pays

    path = cep_request.socket_path()
    if argv[2] in cep_request.MODULES and path is not None and os.path.exists(path):
        cep_request.delegate(path, argv[2], argv[3:])


_next_sitecustomize(_installed_pyspark_first())
_forked_if_fresh()
