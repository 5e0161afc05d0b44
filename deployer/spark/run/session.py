"""The Spark session a deployment runs in: its settings and its log (its stop: deployer.spark.run.stop).

`cep run` starts its own session (`spark_session`) and stops it before its summary
(`deployer.spark.run.stop.stop_session`);
`cep serve`, the tests and the benchmarks may bring theirs, which `SparkDeployment` configures with
`SESSION_CONF` (what every query's checkpoint records and a restart must keep).

Spark's log goes to a file, not to the terminal (docs/settings.md, "Spark's log"): the JVM that
`spark_session` starts writes its standard output and error there (log4j's console, the JVM's own
warnings, and what the Python workers it starts print: their output passes through it), and so do
the py4j and pyspark loggers of this process. A run prints that file's path once, and its errors
once, in a line of its own. With a local master, the Python processes that JVM starts import the
installed PySpark rather than Spark's zip of it (deployer/spark/run/worker_path/sitecustomize.py).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from deployer import settings
from deployer.spark import hadoop
from deployer.spark.run import class_path, jvm_archive
from deployer.spark.run.lookup import skip_data_source_lookup
from deployer.spark.run.names import remember_names
from deployer.spark.run.warm import warm_python_workers
from deployer.spark.run.worker_path import cep_zygote
from deployer.spark.run.worker_python import WORKER_PATH, python_of_workers
from stores.urls import redact_text

# What a deployment needs of the session it runs in, whoever built it: UTC, non-ANSI arithmetic
# (failures are found per event and dead-lettered, never left to fail a batch) and the RocksDB
# state store (transformWithStateInPandas, for TUPLE and BATCH windows, supports no other), which
# commits a micro-batch's state changes as a changelog rather than a copy of its files: a stateful
# micro-batch's fixed cost is lower (an ad-hoc comparison in one process). Spark reads a checkpoint
# written either way (its documentation: the setting can be turned on for an existing query).
# Checkpoint files (offsets and commits logs, state store files) are written through Hadoop's
# FileSystem API, not its FileContext API (Spark's default), whose local implementation forks a
# `readlink` and a `chmod` process per file it renames or creates: most of the time a micro-batch
# spent logging its offsets and commit (jstack samples, ad hoc; bench/run's micro-batch rows against
# "Spark's default checkpoint files" measure the difference). Spark's
# FileSystem-based manager renames without an atomic "fail if there" check, which only matters to
# two runs writing one checkpoint at once; deployer.spark.run.checkpoint's lock refuses the second run.
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
POLLING_DELAY = "spark.sql.streaming.pollingDelay"
SESSION_CONF = {
    # Adaptive execution may not replace a stage that turned out empty by an empty relation
    # (AQEPropagateEmptyRelation): the observations in that stage (the events a Filter drops, the
    # rows a sink writes: docs/guarantees.md, "Counting events") would go with it, and Spark then
    # completes their Observation with an empty row. A micro-batch whose events a WHERE all drops
    # counted none of them (found by the differential fuzzer). The rule only saves work on stages
    # that are empty, which a micro-batch's are cheap to run anyway.
    "spark.sql.adaptive.optimizer.excludedRules": (
        "org.apache.spark.sql.execution.adaptive.AQEPropagateEmptyRelation"
    ),
    # Nor may the optimizer replace a WHERE that is always false (or NULL) by an empty relation
    # (PruneFilters): the observation below it, which counts the events the WHERE drops, would go
    # with it, and the events of a batch read by such WHEREs alone would never be counted (found by
    # the differential fuzzer). Such a WHERE is evaluated per event instead, which costs little.
    # Nor may it reassociate a chain of products or sums to fold its constants together
    # (ReorderAssociativeOperator): `(v * 2147483647) * 1000000000` became `v * <the two constants'
    # product>`, which overflows where the language's left-to-right evaluation does not (v = 0 gives
    # 0), so every event was dead-lettered (found by the differential fuzzer, seed 38107).
    # Nor fold constants (ConstantFolding): a deployment's queries share its plan's expressions, and
    # two threads folding one `to_json` at once broke the run (docs/fuzzing.md, seed 4249).
    "spark.sql.optimizer.excludedRules": (
        "org.apache.spark.sql.catalyst.optimizer.PruneFilters,"
        "org.apache.spark.sql.catalyst.optimizer.ReorderAssociativeOperator,"
        "org.apache.spark.sql.catalyst.optimizer.ConstantFolding"
    ),
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "false",
    # One Python workers' daemon, not two: Spark keeps a daemon per worker environment, and this
    # setting adds an entry to the environment of the tasks of Python UDFs (mapInArrow: the sources'
    # and the operators' failure splits, ReadSQL) but not of the stateful processors', so each
    # query's first stateful stage waited for a second daemon to import what the first had
    # (deployer/spark/run/warm.py). The traceback of a Python error keeps PySpark's own frames.
    "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "false",
    # The stateful processors that read pandas frames (a BATCH window's, a TUPLE window's over
    # decimals or strings, an OUTPUT limit's) get an integer column with a NULL as Python ints and
    # NA, not as floats: a bigint above 2**53 came back rounded, and one near 2**63 failed the
    # micro-batch on its way back to Arrow (found by the differential fuzzer, seed 7516).
    "spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype": "true",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # A stopped query's state stores (each a RocksDB instance, with native memory) are closed by the
    # state stores' maintenance, not by the stop: at the default 60 s a `cep serve` that deploys
    # and undeploys often kept those of every recent query open (bench/serve_cycles.py).
    "spark.sql.streaming.stateStore.maintenanceInterval": "10s",
    CHECKPOINT_FILE_MANAGER: (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
}


# What Spark's UI keeps of past work lives in the driver's heap: every micro-batch is a SQL execution,
# kept with its plan graph up to the default 1,000, which a long-lived `cep serve` reaches after some
# hundred deployments; the UI shows the recent ones. Generated code is cached for 1,000 plans, not
# 100: each micro-batch is planned again, and a few queries side by side use more than 100 pieces of
# generated code at once, so that the default cache compiled nearly every one anew (~750 compiles
# of ~20 ms in a run of two pattern sinks; 6 with this cache). Static settings: given to the JVM at its start,
# not to a session (changing them on a running application is refused).
CONTEXT_CONF = {
    # PySpark's DataFrame debugging records the Python call site of every function it is given
    # (`F.col`, `F.lit`, `when`, ...) in the JVM, for the query context of ANSI errors (ANSI is off
    # here): several py4j round trips per call, ~0.5 s of the ~8,000 round trips of building
    # examples/daily_bill.cpl's query, and again in every micro-batch whose writer builds DataFrames.
    # PySpark reads it once per process, from the session active at its first function call; a
    # static setting.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.ui.retainedExecutions": "100",
    "spark.sql.codegen.cache.maxEntries": "1000",
    "spark.ui.retainedJobs": "200",
    "spark.ui.retainedStages": "200",
    "spark.sql.streaming.ui.retainedQueries": "20",
}

# The environment entries Spark's driver-side Python runners add to the Python function they run:
# the Python streaming source's runner (one per source, started with each query) and the pre-init
# runner of transformWithStateInPandas (one per stateful operator, at each query's first batch) put
# them into the function's own java.util.HashMap, not a copy (Spark 4.x: StreamingPythonRunner,
# PythonStreamingSourceRunner). Every query of a deployment that reads one source shares that map
# (the registered data source's; its readers' functions, which go into every task, hold it too), and
# queries start in threads of their own: two runners adding the same new key at once leave the
# unsynchronized map with a size one more than its entries, and from then on every task that
# carries it fails to deserialize (java.io.OptionalDataException in HashMap.readObject), failing the
# queries (seen 1 full test run in 5). Present beforehand, the keys are only replaced, which changes
# neither the map's size nor its table. Their values are the ones those runners set.
_RUNNER_ENV = ("SPARK_LOCAL_DIRS", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE", "SPARK_PYTHON_RUNTIME")


# Spark's state server logs a warning each time a stateful processor reads a value state that holds
# nothing: the Pattern operator asks once per key it meets for the first time, so a micro-batch of
# 10,000 new keys wrote 10,000 identical lines to the run's log. Its errors still go to the log.
_CHATTY = {"org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer": "ERROR"}
_LEVELS = ["ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"]


def set_log_level(spark: SparkSession, level: str) -> None:
    """Spark's log level (`SparkContext.setLogLevel`), with the loggers of `_CHATTY` held at their
    level or above: never chattier than `level` either (OFF silences them too)."""
    spark.sparkContext.setLogLevel(level)
    hold_chatty(spark, level)


def hold_chatty(spark: SparkSession, level: str = "ERROR") -> None:
    """The loggers of `_CHATTY` at their level, or at `level` where that is stricter."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log4j = jvm.org.apache.logging.log4j
    for name, floor in _CHATTY.items():
        stricter = max(floor, level.upper(), key=lambda v: _LEVELS.index(v) if v in _LEVELS else 0)
        log4j.core.config.Configurator.setLevel(name, log4j.Level.toLevel(stricter))


def prepare_session(spark: SparkSession) -> None:
    """Make `spark` fit for a deployment, whoever built it: `SESSION_CONF` (a query records these
    in its checkpoint when it first starts; a restart keeps them), the polling delay of
    CEP_POLL_MS, and the Python functions created from now on carry `_RUNNER_ENV` from the start."""
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    # Spark's default (10 ms) has every idle query ask each of its sources for new input a hundred
    # times a second, each a call into the source's Python process: an idle `cep run` of
    # examples/daily_bill.cpl kept 30% of a core busy (its JVM and its sources' Python processes,
    # sampled from /proc, ad hoc), 12% at 100 ms. 50 ms (since 2026-12-03): 6.3-8.7% against
    # 5.7-6.4% at 100 ms and 10% at 25 ms (the process tree's CPU over 30 s of an idle run, ad hoc),
    # for a stateless `ON SQL` row in Postgres 0.27-0.32 s after its file (p50) where it took 0.51 s
    # at 100 ms in the same hour (bench/run --only e2e, alternated). Not recorded in checkpoints:
    # each start may choose another.
    spark.conf.set(POLLING_DELAY, f"{settings.current().poll_ms}ms")
    hold_chatty(spark)  # a session someone else built: its log level is theirs
    skip_data_source_lookup(spark)
    remember_names()
    sc = spark.sparkContext
    env = sc.environment
    if all(key in env for key in _RUNNER_ENV):
        return
    conf = sc._jsc.sc().conf()
    env.setdefault("SPARK_LOCAL_DIRS", sc._jvm.org.apache.spark.util.Utils.getLocalDir(conf))  # type: ignore[union-attr]
    env.setdefault(
        "SPARK_AUTH_SOCKET_TIMEOUT",
        str(conf.getTimeAsSeconds("spark.python.authenticate.socketTimeout", "15s")),
    )
    env.setdefault("SPARK_BUFFER_SIZE", str(conf.getInt("spark.buffer.size", 65536)))
    env.setdefault("SPARK_PYTHON_RUNTIME", "PYTHON_WORKER")


UDS_DIR = "spark.python.unix.domain.socket.dir"
# AF_UNIX socket paths are limited to 107 bytes; Spark names a worker's socket "/.<uuid>.sock" (43).
_UDS_DIR_MAX = 60


def python_worker_conf(master: str) -> dict[str, str]:
    """Session settings for the Python workers (parsing, TUPLE/BATCH state, ReadSQL/UpdateSQL).

    With a local master the executor runs in this process's JVM, and it talks to its Python workers
    over a Unix domain socket instead of loopback TCP: each Python task has a fixed cost of its own
    (bench/run's micro-batch rows), which this lowers. The sockets go to a private directory with a
    short path, removed at exit (Spark leaves socket files behind). Not for a cluster, whose
    executors run on other machines, where that directory does not exist; nor with
    CEP_PYTHON_UDS=0; nor when the temporary directory's path is too long for a socket."""
    if not settings.current().python_uds or not master.startswith("local"):
        return {}
    if len(tempfile.gettempdir()) + len("/cep-uds-xxxxxxxx") > _UDS_DIR_MAX:
        return {}
    directory = tempfile.mkdtemp(prefix="cep-uds-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    if not settings.current().python_zygote:  # taken: no daemon starts one (worker_path/cep_zygote.py)
        Path(directory, cep_zygote.LOCK_NAME).touch()
    return {
        "spark.python.unix.domain.socket.enabled": "true",
        UDS_DIR: directory,
    }


def spark_session(
    master: str | None = None,
    app: str = "paascep",
    log: Path | None = None,
    bounded: bool = False,
    launched: Callable[[], dict[str, str]] | None = None,
) -> SparkSession:
    """A session configured for CEP: UTC, few shuffle partitions, its log in a file.

    The first session of a process starts the JVM, with its output in `log` (default:
    `run_log(None)`, under $CEP_DATA_DIR/logs), and the options of `driver_jvm_options`: a
    `bounded` run's (one that ends once its input is consumed) or a long-lived one's; later ones
    share that JVM and its log (`jvm_log`). A JVM started already (deployer.spark.run.launch) is
    waited for instead: `launched` returns the options it was started with once it is up."""
    if launched is not None:
        options, fresh = launched(), True
    else:
        options = session_options(master, app)
        fresh = SparkContext._gateway is None
        if fresh:
            start_jvm(options, bounded, log or run_log(None))
    if fresh:  # its context is not made yet: a file system class its JVM cannot load must not be in it
        options = hadoop.loadable(options, SparkContext._jvm)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if (
        "spark.sql.shuffle.partitions" not in options
    ):  # a cluster: its parallelism, now that the context is up
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions(spark)))
    set_log_level(spark, settings.current().spark_log_level)
    if fresh and options["spark.master"].startswith("local"):
        warm_python_workers(spark)
    return spark


def session_options(master: str | None, app: str) -> dict[str, str]:
    """The settings `spark_session` makes a session with (and starts its JVM with)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    master = master or "local[*]"
    conf = settings.current()
    return {
        "spark.app.name": app,
        "spark.master": master,
        # in the context's conf, not only this session's: a session made from it later
        # (`newSession`) starts from the same number, not Spark's 200
        **(
            {"spark.sql.shuffle.partitions": str(n)}
            if (n := conf.shuffle_partitions or _local_cores(master))
            else {}
        ),
        # Bind and advertise the same address: advertising the host's name while bound to loopback
        # makes block fetches (cached batches, shuffles) fail with "connection refused". Set
        # CEP_SPARK_BIND / CEP_SPARK_HOST to the machine's address when executors run elsewhere.
        "spark.driver.bindAddress": conf.spark_bind,
        "spark.driver.host": conf.advertised_host,
        "spark.ui.showConsoleProgress": "false",
        **SESSION_CONF,
        **python_worker_conf(master),
        **class_path.conf(master),
    }


def _local_cores(master: str) -> int | None:
    """The cores of a local master, before its context exists; None for a cluster's."""
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master.strip())
    if m is None:
        return None
    threads = m.group(1)
    if threads is None:  # `local`: one thread
        return 1
    return len(os.sched_getaffinity(0)) if threads == "*" else int(threads)


def shuffle_partitions(spark: SparkSession) -> int:
    """CEP_SHUFFLE_PARTITIONS, or one per core of the session: each partition of a stateful query
    is a task and a state store loaded and committed every micro-batch, so more partitions than
    cores only queue (the e2e job's micro-batch: 386 ms with 4 on 2 cores, 296 ms with 2; ad hoc)."""
    return settings.current().shuffle_partitions or max(1, spark.sparkContext.defaultParallelism)


# The JIT compiler's second tier (C2) pays back only on a long run: a bounded `cep run` of
# examples/daily_bill.cpl spent more CPU in C2's compiler thread than in all its queries' work (a
# JFR recording: 43 s of compilation in a 41 s run on 2 cores; what these options and the class
# archive save: bench/run --only small, docs/settings.md). The serial collector has no collector threads to compete with the work
# on a small machine, and a bounded run's heap is short-lived. A run that watches its input (or
# `cep serve`) keeps Spark's compiler and collector: its hot code is compiled once and runs for
# hours, and gives free memory back (CEP_LONG_JVM_OPTIONS): the C library's every 5 s, the heap's
# beyond 40 % of it once collected (the JDK's 70 % kept up to 3.3 times the live data), cold compiled
# code from a 100 MB cache (bench/run --only serve; docs/settings.md, "The JVM of a long-lived run").
# A JDK before 17.0.9 has no trim option: `IgnoreUnrecognizedVMOptions` lets it start without.
_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


_archive: jvm_archive.Archive | None = None  # the archive options of the JVM this process started


def driver_jvm_options(bounded: bool, master: str = "local[*]") -> dict[str, str]:
    """The driver JVM's options for a run that is `bounded`: CEP_BOUNDED_JVM_OPTIONS and the class
    archive's (deployer.spark.run.jvm_archive; one per class path: `master`'s); for another run,
    CEP_LONG_JVM_OPTIONS."""
    global _archive
    if not bounded:
        chosen = _chosen(settings.current().long_jvm_options)
        return {_DRIVER_JAVA_OPTIONS: chosen} if chosen else {}
    _archive = jvm_archive.options(_chosen(settings.current().bounded_jvm_options), class_path.key(master))
    if _archive.making is not None:
        # A program that never calls finish_jvm would leave the JVM's archive half-named behind.
        atexit.register(finish_jvm, lambda _: None)
    return {_DRIVER_JAVA_OPTIONS: _archive.options} if _archive.options else {}


def _chosen(options: str) -> str:
    """JVM options as a setting holds them; "none" (Spark's own) is none (an empty variable takes the
    default, as every setting does)."""
    options = options.strip()
    return "" if options.lower() == "none" else options


def finish_jvm(say: Callable[[str], None]) -> None:
    """After `stop_session`, at the end of a bounded run that started the JVM: if that JVM writes the
    class archive, let it end and write it (deployer.spark.run.jvm_archive.finish), saying so; this
    process starts a JVM of its own again if it needs one. At the latest at this process's exit."""
    global _archive
    archive, _archive = _archive, None
    gateway = SparkContext._gateway
    if archive is None or archive.making is None or gateway is None:
        return
    say(f"jvm class archive: writing {archive.path} (once; later runs start faster)")
    jvm_archive.finish(archive, getattr(gateway, "proc", None))
    SparkContext._gateway = None
    SparkContext._jvm = None


_jvm_log: Path | None = None


def jvm_log() -> Path | None:
    """The file the JVM of this process writes its output to, if `launch_jvm` started it."""
    return _jvm_log


def run_log(checkpoint: str | Path | None) -> Path:
    """A new file for the Spark log of a run: in `CHECKPOINT/logs/`, beside the progress it keeps,
    else in `$CEP_DATA_DIR/logs/`; named after the time (UTC) and the process."""
    base = Path(checkpoint) / "logs" if checkpoint is not None else settings.current().data_dir / "logs"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return base.resolve() / f"spark-{stamp}-{os.getpid()}.log"


def start_jvm(options: dict[str, str], bounded: bool, log: Path) -> None:
    """Start the JVM of a session of `options` with the context's conf and `driver_jvm_options`."""
    launch_jvm({**options, **CONTEXT_CONF, **driver_jvm_options(bounded, options["spark.master"])}, log)


def launch_jvm(options: dict[str, str], log: Path) -> None:
    """Start this process's JVM (Spark's driver) as PySpark does, its output appended to `log`, and
    send the py4j and pyspark loggers there too. Raises RuntimeError, with the end of the log, when
    the JVM does not start (no Java, a bad option)."""
    global _jvm_log
    log.parent.mkdir(parents=True, exist_ok=True)
    if python_of_workers(options.get("spark.master", "")):  # a local master
        # The Python processes this JVM starts import the installed PySpark, not Spark's zip of it
        # (deployer/spark/run/worker_path/sitecustomize.py): they inherit its environment.
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(WORKER_PATH), *(p for p in paths if p != str(WORKER_PATH))]
        )
        # and fork from a daemon that has imported what they import (worker_path/cep_daemon.py)
        options = {"spark.python.daemon.module": "cep_daemon", **options}
        cep_zygote.spawn(options.get(UDS_DIR), log)
    conf = SparkConf()
    for key, value in options.items():
        conf.set(key, value)
    handler = logging.FileHandler(log, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("py4j", "pyspark"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False
    try:
        with log.open("ab") as out:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": subprocess.STDOUT})
    except Exception as err:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        said = "; ".join(lines[-3:]) or "no output"
        raise RuntimeError(f"Spark's JVM did not start ({err}): {redact_text(said)} (log: {log})") from None
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    _jvm_log = log
