"""The modules Spark imports in a fresh Python process at every query start stay light: pandas is
imported where rows are handled, not when the module is (docs/architecture.md, "What a run costs").

At a query's first micro-batch Spark asks each Python stateful processor for its state's schema in a
new process (`transform_with_state_driver_worker`, not forked from the daemon), and reads each Python
source's offsets in another (`python_streaming_source_runner`): both unpickle the processor or the
source, which imports its module. pandas alone took ~0.3 s of each such start (the executors' workers
come from the daemon, which has it preloaded)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKER_PATH = ROOT / "deployer" / "spark" / "run" / "worker_path"
# every module that holds a StatefulProcessor or a DataSource the deployer hands to Spark
STARTED_FRESH = (
    "deployer.spark.output.processor",
    "deployer.spark.patterns.processor",
    "deployer.spark.streams.file_source",
    "deployer.spark.streams.merge_sequencer",
    "deployer.spark.streams.redis_source",
    "deployer.spark.streams.sequencer",
    "deployer.spark.streams.trigger_source",
    "deployer.spark.windows.tuple_buckets",
    "deployer.spark.windows.window_state",
)
HEAVY = ("pandas", "croniter")

# what the fresh process has imported before it unpickles ours: PySpark's own driver worker
_PROBE = """
import json, sys
import pyspark.sql.streaming.transform_with_state_driver_worker, pyspark.sql.datasource
before = set(sys.modules)
__import__(sys.argv[1])
print(json.dumps(sorted({m.split(".")[0] for m in set(sys.modules) - before})))
"""


def test_every_module_spark_starts_fresh_is_listed() -> None:
    holders = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "deployer" / "spark").rglob("*.py")
        if "(StatefulProcessor)" in (text := p.read_text()) or "(DataSource)" in text
    }
    assert holders == set(STARTED_FRESH)


@pytest.mark.parametrize("module", STARTED_FRESH)
def test_a_query_start_imports_no_pandas(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, module], cwd=ROOT, capture_output=True, text=True, check=True
    )
    imported = set(json.loads(done.stdout))
    assert module.split(".")[0] in imported  # the probe did import it
    assert imported & set(HEAVY) == set()


def test_the_daemon_preloads_the_drivers_of_the_stores_its_workers_open() -> None:
    """The executors' workers are forked from the daemon (worker_path/cep_daemon.py): a worker that
    calls a store finds its driver imported, though the driver's run imports it only once a store
    is opened (stores/registry.py)."""
    probe = (
        "import json, sys; sys.path.insert(0, 'deployer/spark/run/worker_path'); import cep_daemon, importlib; "
        "[importlib.import_module(m) for m in cep_daemon.PRELOADED]; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert {"psycopg", "sqlalchemy", "redis", "pandas"} <= set(json.loads(done.stdout))


def _imports_inside_functions(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    found |= {a.name for a in inner.names}
                elif isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
                    found.add(inner.module)
    return found


def test_the_daemon_preloads_what_the_state_clients_import_at_their_first_call() -> None:
    """PySpark's state clients import the state server's messages (protobuf) inside their methods:
    every worker of a stateful processor imported them at its first state call, and so did the
    runner Spark starts for each stateful processor at a query's start to learn its state's schema
    (forked from the zygote, which preloads the daemon's modules): ~50 ms of each such runner's
    60-90 ms (docs/architecture.md, "What a run costs on Spark")."""
    clients = sorted((Path(pyspark.__file__).parent / "sql" / "streaming").glob("*_client.py"))
    lazy = set().union(*(_imports_inside_functions(f.read_text()) for f in clients))
    assert "pyspark.sql.streaming.proto.StateMessage_pb2" in lazy  # what the probe is about
    probe = (
        f"import json, sys; sys.path.insert(0, {str(WORKER_PATH)!r}); import cep_daemon, importlib; "
        "[importlib.import_module(m) for m in cep_daemon.PRELOADED]; print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert lazy - set(json.loads(done.stdout)) == set()


SPARK_HOME = Path(pyspark.__file__).parent  # the installed wheel's, as a local session's


def _spark_archives() -> list[Path]:
    """What Spark puts at the head of its Python processes' path, in its order: the zips, the jar."""
    lib, jars = SPARK_HOME / "python" / "lib", SPARK_HOME / "jars"
    return [*sorted(lib.glob("*.zip")), *sorted(jars.glob("spark-core_*.jar"))]


def _spark_environment(archives: list[Path]) -> dict[str, str]:
    """The environment of a Python process a local session's JVM starts (the parts that matter)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SPARK_HOME": str(SPARK_HOME),
        "PYTHONPATH": os.pathsep.join([*map(str, archives), str(WORKER_PATH), str(ROOT)]),
    }


def test_the_archives_spark_puts_on_its_processes_path_come_after_the_installed_packages() -> None:
    """Spark puts PySpark's and py4j's zips and its core jar ahead of site-packages on the path of
    every Python process it starts; with PySpark installed from its wheel they hold nothing the
    installed packages do not (the jar no Python at all), and each costs a read of its directory
    (the jar's 5,973 entries ~22 ms) to the first import that reaches it: worker_path/sitecustomize.py
    moves them after everything else."""
    archives = _spark_archives()
    assert len(archives) >= 2
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sys.path))"],
        env=_spark_environment(archives), capture_output=True, text=True, check=True,
    )  # fmt: skip
    path = json.loads(done.stdout)
    installed = path.index(str(SPARK_HOME.parent))
    assert all(path.index(str(a)) > installed for a in archives), path


def test_a_process_started_through_cep_python_reads_no_archive_as_it_starts() -> None:
    """An interpreter looks for its first module on PYTHONPATH before its standard library, and
    looks for `sitecustomize` everywhere: Spark's archives at the head of PYTHONPATH were read by
    every Python process the JVM started (~27 ms of its ~58). Started through
    worker_path/cep_python (a local session's PYSPARK_PYTHON), the process reads none as it starts,
    and has them last on its path."""
    archives = _spark_archives()
    env = {**_spark_environment(archives), "PAASCEP_WORKER_PYTHON": sys.executable}
    probe = "import json, sys, zipimport; print(json.dumps([sys.executable, list(zipimport._zip_directory_cache), sys.path]))"
    done = subprocess.run(
        [str(WORKER_PATH / "cep_python"), "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    executable, read, path = json.loads(done.stdout)
    assert Path(executable).resolve() == Path(sys.executable).resolve()
    assert read == []
    assert path[-len(archives) :] == [str(a) for a in archives]


def test_the_requester_imports_only_what_sending_its_request_needs() -> None:
    """Every fresh process a query's start runs asks the zygote first (worker_path/sitecustomize.py),
    and pays for what that imports: the requester's end (cep_request) leaves out the zygote's own
    modules (typing, traceback, importlib, contextlib: ~5 ms a process, measured ad hoc)."""
    probe = (
        "import sys; before = set(sys.modules); import cep_request; print(sorted(set(sys.modules) - before))"
    )
    env = {**os.environ, "PYTHONPATH": str(WORKER_PATH)}
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout
    imported = set(ast.literal_eval(out))
    assert "cep_request" in imported and "json" in imported and "socket" in imported  # it did import
    zygotes = {
        "typing",
        "traceback",
        "tokenize",
        "contextlib",
        "importlib",
        "linecache",
        "warnings",
        "cep_zygote",
    }
    assert imported & zygotes == set()
    # and the requester is what sitecustomize imports, not the zygote's whole module
    site = ast.parse((WORKER_PATH / "sitecustomize.py").read_text(encoding="utf-8"))
    modules = {a.name for n in ast.walk(site) if isinstance(n, ast.Import) for a in n.names}
    assert "cep_request" in modules and "cep_zygote" not in modules
