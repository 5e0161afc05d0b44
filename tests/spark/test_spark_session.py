"""The session settings of deployer.spark.run.deployment: Python workers over a Unix domain socket
locally, and Python functions whose environment no query changes while others use it."""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.session import (
    CONTEXT_CONF,
    POLLING_DELAY,
    prepare_session,
    python_worker_conf,
    set_log_level,
)
from deployer.spark.run.stop import python_daemons
from deployer.spark.streams import file_source

pytestmark = pytest.mark.spark


def test_python_workers_talk_over_a_unix_socket_in_local_mode(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.python.unix.domain.socket.enabled") == "true"
    directory = Path(conf.get("spark.python.unix.domain.socket.dir"))
    assert directory.is_dir()
    assert len(str(directory)) + len("/.00000000-0000-0000-0000-000000000000.sock") <= 107

    def doubled(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # pickled by value
        for b in batches:
            yield pa.RecordBatch.from_arrays([pc.multiply(b.column(0), 2)], names=["id"])

    df = spark.range(0, 100, 1, 2)
    assert sorted(r.id for r in df.mapInArrow(doubled, df.schema).collect()) == list(range(0, 200, 2))
    # the socket Spark made for its Python workers is there
    assert any(p.name.endswith(".sock") for p in directory.iterdir())


def test_python_workers_fork_from_a_daemon_that_has_imported_their_modules(spark: Any) -> None:
    """A local session's workers come from worker_path/cep_daemon.py, not PySpark's own daemon: a
    worker finds the project's modules (the stores' ReadSQL, the Sequencer, the spool) imported
    before its function ran, as its parent did."""
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "cep_daemon"

    def modules(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # pickled by value
        import os
        import sys

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
        names = [
            n
            for n in ("deployer.spark.datastores.sql", "deployer.spark.streams.sequencer")
            if n in sys.modules
        ]
        for _ in batches:
            yield pa.RecordBatch.from_arrays(
                [pa.array([parent]), pa.array([",".join(names)])], names=["p", "m"]
            )

    df = spark.range(0, 4, 1, 2)
    rows = df.mapInArrow(modules, "p string, m string").collect()
    # the daemon as Spark started it, or as the session's zygote forked it (it keeps the zygote's
    # command line: deployer/spark/run/worker_path/cep_zygote.py)
    assert rows and all("cep_daemon" in r.p or "cep_zygote" in r.p for r in rows), [r.p for r in rows]
    assert all(r.m == "deployer.spark.datastores.sql,deployer.spark.streams.sequencer" for r in rows), rows


def test_workers_leave_the_daemons_objects_out_of_their_collections(spark: Any) -> None:
    """The daemon froze what it preloaded (`gc.freeze()`): a reused worker's `gc.collect()` after each
    task walks only the worker's own objects, not the ~130,000 of pandas, pyarrow and the project's
    modules (~110 ms per task when it walked them all)."""

    def frozen(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # pickled by value
        import gc
        import time

        start = time.process_time()
        gc.collect()
        took = time.process_time() - start
        for _ in batches:
            yield pa.RecordBatch.from_arrays(
                [pa.array([gc.get_freeze_count()]), pa.array([took])], names=["n", "s"]
            )

    rows = spark.range(0, 4, 1, 2).mapInArrow(frozen, "n long, s double").collect()
    assert rows and all(r.n > 50_000 for r in rows), rows
    # a collection over the unfrozen objects (the task's own) takes far less than one over them all
    assert min(r.s for r in rows) < 0.05, rows


def test_generated_code_is_cached_for_more_plans_than_a_few_queries_use(spark: Any) -> None:
    """Spark's default cache of 100 compiled plans missed on nearly every compile of a few queries
    side by side (each micro-batch is planned again); the JVMs `cep` starts keep 1,000."""
    kept = spark.sparkContext.getConf().get("spark.sql.codegen.cache.maxEntries")
    assert kept == CONTEXT_CONF["spark.sql.codegen.cache.maxEntries"]
    assert int(kept) >= 1000


def test_loopback_tcp_for_a_cluster_when_turned_off_or_when_the_path_is_too_long(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert python_worker_conf("spark://127.0.0.1:7077") == {}
    monkeypatch.setenv("CEP_PYTHON_UDS", "0")
    assert python_worker_conf("local[2]") == {}
    monkeypatch.delenv("CEP_PYTHON_UDS")
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert python_worker_conf("local[*]") == {}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path.parent.parent))  # short enough
    if len(str(tmp_path.parent.parent)) <= 40:
        conf = python_worker_conf("local")
        assert conf["spark.python.unix.domain.socket.enabled"] == "true"
        assert Path(conf["spark.python.unix.domain.socket.dir"]).parent == tmp_path.parent.parent


# Two windows of one event-time stream: two queries (and the dead letters' third) read one source,
# and each has transformWithStateInPandas operators (the stream's sequencer, the TUPLE window).
SHARED_SOURCE = """
CREATE STREAMSCHEMA calls WITH caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
INSERT INTO per_hour SELECT caller, count(*) AS n FROM calls WINDOW TIME SIZE 1 HOUR GROUP BY caller;
INSERT INTO last_two SELECT caller, sum(duration) AS d FROM calls WINDOW TUPLE SIZE 2 GROUP BY caller;
"""


def _seq(s: Any) -> list[Any]:
    return [s.apply(i) for i in range(s.size())]


def _python_functions(plan: Any) -> list[Any]:
    """The PythonFunction of every Python UDF in a JVM plan tree (transformWithStateInPandas, the
    pandas UDFs), as py4j objects."""
    found, nodes = [], [plan]
    while nodes:
        node = nodes.pop()
        nodes.extend(_seq(node.children()))
        exprs = _seq(node.expressions())
        while exprs:
            e = exprs.pop()
            exprs.extend(_seq(e.children()))
            if e.getClass().getSimpleName() == "PythonUDF":
                found.append(e.func())
    return found


def test_no_query_adds_to_the_environment_of_a_python_function_others_share(
    spark: Any, tmp_path: Path
) -> None:
    """Spark's driver-side Python runners (a Python source's, one per query; transformWithStateInPandas'
    pre-init, at a query's first batch) put entries into the environment map of the function they
    run, itself, unsynchronized, while the other queries of the deployment start in threads of their
    own and serialize tasks holding the same map: two runners adding a key at once corrupted it and
    failed the queries (java.io.OptionalDataException when a task was deserialized). The deployment
    gives every function those entries beforehand (deployer.spark.run.session.prepare_session): then the
    runners only replace values. Checked on the maps themselves after a run: nothing was added."""
    from spark_helpers import at, compile_text, prepare

    rows = [{"caller": i % 3, "duration": i, "ts": at(minutes=7 * i)} for i in range(30)]
    sources = prepare(tmp_path, {"calls": [rows[:15], rows[15:]]})
    deployment = SparkDeployment(
        spark,
        compile_text(SHARED_SOURCE),
        sources,
        {s: f"file:{tmp_path / 'out'}" for s in ("per_hour", "last_two")},
        str(tmp_path / "checkpoint"),
        dead_letter=f"file:{tmp_path / 'dead'}",
        until_idle=True,
    )
    given = set(spark.sparkContext.environment)
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    source = manager.lookupDataSource(file_source.NAME).dataSourceCls().envVars()
    deployment.run(out=io.StringIO())

    assert len(deployment._launched) == 2  # the two windows' queries (the first writes the dead letters)
    assert set(source.keySet().toArray()) == given  # every query's source runner has run
    functions = [
        f
        for df, _, _ in deployment._launched.values()
        for f in _python_functions(df._jdf.queryExecution().analyzed())
    ]
    assert len(functions) >= 4  # the sequencers and the TUPLE window's state, at least
    for f in functions:
        assert set(f.envVars().keySet().toArray()) == given


def test_an_idle_query_looks_for_input_as_often_as_the_setting_says(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CEP_POLL_MS is what each query of a deployment waits, having found no new input, before it
    asks its sources again (Spark's own default, 10 ms, kept idle runs' processes busy)."""
    from spark_helpers import at, compile_text, prepare

    monkeypatch.setenv("CEP_POLL_MS", "250")
    rows = [{"caller": i % 3, "duration": i, "ts": at(minutes=7 * i)} for i in range(4)]
    deployment = SparkDeployment(
        spark,
        compile_text(SHARED_SOURCE),
        prepare(tmp_path, {"calls": [rows]}),
        {s: f"file:{tmp_path / 'out'}" for s in ("per_hour", "last_two")},
        str(tmp_path / "checkpoint"),
        dead_letter=f"file:{tmp_path / 'dead'}",
        until_idle=True,
    )
    assert spark.conf.get(POLLING_DELAY) == "250ms"
    deployment.run(out=io.StringIO())
    assert len(deployment.queries) == 2
    assert [q._jsq.streamingQuery().pollingDelayMs() for q in deployment.queries] == [250] * 2
    monkeypatch.delenv("CEP_POLL_MS")
    prepare_session(spark)  # as every deployment does
    assert spark.conf.get(POLLING_DELAY) == "50ms"  # the default


STATE_SERVER = "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer"


def test_the_state_server_logs_no_warning_per_new_key(spark: Any) -> None:
    """The state server warns each time a processor reads a value state that holds nothing, once per
    new key of a Pattern: held at ERROR whatever the run's level, and silenced with the rest."""
    jvm = spark.sparkContext._jvm
    manager = jvm.org.apache.logging.log4j.LogManager

    def level(name: str | None = None) -> str:
        return str(
            (manager.getRootLogger() if name is None else manager.getLogger(name)).getLevel().toString()
        )

    try:
        set_log_level(spark, "WARN")
        assert (level(), level(STATE_SERVER)) == ("WARN", "ERROR")
        set_log_level(spark, "INFO")
        assert (level(), level(STATE_SERVER)) == ("INFO", "ERROR")
        set_log_level(spark, "OFF")  # a deployment's stop silences everything
        assert (level(), level(STATE_SERVER)) == ("OFF", "OFF")
        set_log_level(spark, "WARN")
        assert level(STATE_SERVER) == "ERROR"
        # a session someone else built (the tests', a service's) gets the floor from the deployment
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            STATE_SERVER, jvm.org.apache.logging.log4j.Level.WARN
        )
        prepare_session(spark)
        assert level(STATE_SERVER) == "ERROR"
    finally:
        set_log_level(spark, "ERROR")  # the tests' level (tests/conftest.py)


def test_stateful_and_stateless_python_tasks_fork_from_one_daemon(spark: Any, tmp_path: Path) -> None:
    """Spark keeps a Python daemon per worker environment: the stateful processors' tasks (the
    Sequencer of a stream with a WATERMARK) and the Python UDFs' (the source's parsing, a Map that
    can fail) get the same environment, so a query's first stateful stage does not wait for a
    second daemon to start and import what the first has (deployer/spark/run/warm.py)."""
    from tests.spark.spark_helpers import at, compile_text, prepare, run_spark

    graph = compile_text(
        """
        CREATE STREAMSCHEMA calls WITH n integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;
        INSERT INTO doubled SELECT n * 2 AS m, ts FROM calls;
        """
    )
    sources = prepare(tmp_path, {"calls": [[{"n": i, "ts": at(i)} for i in range(20)]]})
    out = run_spark(spark, graph, tmp_path, sources, ["doubled"])
    assert sorted(r["m"] for r in out["doubled"]) == [2 * i for i in range(20)]
    jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    daemons = [
        pid for pid in python_daemons(jvm) if b"cep_daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(daemons) == 1, [_python_environment(pid) for pid in daemons]


def _python_environment(pid: int) -> list[bytes]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return sorted(e for e in entries if e.startswith((b"SPARK_", b"PYTHON", b"PYSPARK")))


def test_a_deployment_skips_sparks_lookup_of_installed_python_data_sources(spark: Any) -> None:
    # Spark looks them up once per JVM, in a Python process of its own, at the first registration
    # (deployer.spark.run.lookup); `prepare_session` records "none" first. The JVM's record is put
    # back to "not looked up" for the test, and restored after.
    jvm = spark.sparkContext._jvm
    manager = getattr(
        getattr(jvm.org.apache.spark.sql.execution.datasources, "DataSourceManager$"), "MODULE$"
    )
    before = manager.dataSourceBuilders()
    getattr(manager, "dataSourceBuilders_$eq")(jvm.scala.Option.empty())
    try:
        prepare_session(spark)
        looked_up = manager.dataSourceBuilders()
        assert looked_up.isDefined() and looked_up.get().isEmpty()
        spark.dataSource.register(file_source.FileStreamDataSource)  # cep's own still register
        assert spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(file_source.NAME)
    finally:
        getattr(manager, "dataSourceBuilders_$eq")(before)
