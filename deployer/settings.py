"""Every `CEP_*` environment variable `cep` reads, as one typed, validated settings object.

Why one place: the variables were read in ten modules, each with its own parsing and defaults (one
default written twice). Here each is declared once (`Settings`' fields: name, type, default, meaning),
parsed once per use (`current()`), refused with a message that names the variable and the value, and
documented in docs/settings.md from the same declarations (tests/architecture checks the table).

The data stores' own variables (`CEP_STORE_<NAME>_URL`) are per store name and are read where the
bindings are resolved (stores.bindings), from the environment given to them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


class SettingsError(ValueError):
    """A `CEP_*` variable holds a value that cannot be used; the message names both."""


def _setting(default: Any, env: str, doc: str, minimum: float | None = None, kind: type | None = None) -> Any:
    """A field of `Settings`: its variable, its meaning, the least value it takes, and how its text is
    read (the default's type, unless given)."""
    kind = kind or (str if default is None else type(default))
    if isinstance(default, Path):
        kind = Path
    return field(default=default, metadata={"env": env, "doc": doc, "minimum": minimum, "kind": kind})


_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Settings:
    data_dir: Path = _setting(
        Path("cep-data"),
        "CEP_DATA_DIR",
        "where embedded SQLite data stores (an unbound `postgresql` or `sqlite` store) and the default "
        "catalog live",
    )
    catalog_url: str | None = _setting(
        None, "CEP_CATALOG_URL", "the catalog of deployments, when `--catalog` is not given"
    )
    store_retries: int = _setting(
        5, "CEP_STORE_RETRIES", "attempts of a data store call that fails transiently (1: no retry)", 1
    )
    store_retry_base_ms: int = _setting(
        500, "CEP_STORE_RETRY_BASE_MS", "the first wait between attempts; each later wait doubles", 0
    )
    count_filtered: bool = _setting(
        True,
        "CEP_COUNT_FILTERED",
        "Spark: count the events each WHERE drops (0 turns it off, for throughput)",
    )
    pattern_max_partials: int = _setting(
        100_000,
        "CEP_PATTERN_MAX_PARTIALS",
        "the most open partial matches a pattern keeps per partition key; beyond it the oldest is dropped "
        "and dead-lettered, with the reason",
        1,
    )
    max_queries: int | None = _setting(
        None,
        "CEP_MAX_QUERIES",
        "Spark with `--until-idle`: streaming queries running at once (default: the session's parallelism, "
        "at least 2)",
        1,
        int,
    )
    python_uds: bool = _setting(
        True,
        "CEP_PYTHON_UDS",
        "Spark local master: Python workers over a Unix domain socket (0: loopback TCP)",
    )
    python_zygote: bool = _setting(
        True,
        "CEP_PYTHON_ZYGOTE",
        "Spark local master with CEP_PYTHON_UDS: the Python processes a query start runs afresh, and the "
        "workers' daemons, are forked from one the driver starts before its JVM, which imports what they "
        "need (0: started afresh, as Spark does)",
    )
    nio_local_fs: bool = _setting(
        True,
        "CEP_NIO_LOCAL_FS",
        "Spark local master: the permission of each checkpoint file Spark writes is set in the JVM, not by "
        "a `chmod` process per file (0: Hadoop's own local file system; deployer/spark/hadoop)",
    )
    shuffle_partitions: int | None = _setting(
        None,
        "CEP_SHUFFLE_PARTITIONS",
        "Spark: `spark.sql.shuffle.partitions`, the state partitions a stateful query's new checkpoint "
        "gets (default: the session's parallelism, its cores); a query whose every stateful operator keeps "
        "one group gets one (deployer/spark/run/partitions.py)",
        1,
        int,
    )
    spark_bind: str = _setting(
        "127.0.0.1",
        "CEP_SPARK_BIND",
        "Spark: the driver's bind address (the machine's, when executors run elsewhere)",
    )
    spark_host: str | None = _setting(
        None, "CEP_SPARK_HOST", "Spark: the address the driver advertises (default: CEP_SPARK_BIND)"
    )
    spark_log_level: str = _setting(
        "WARN",
        "CEP_SPARK_LOG_LEVEL",
        "Spark's log level, in the run's log file (docs/settings.md, \"Spark's log\")",
    )
    bounded_jvm_options: str = _setting(
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "CEP_BOUNDED_JVM_OPTIONS",
        "Spark: options of the JVM a bounded `cep run` (`--until-idle`) starts; `none`: Spark's own "
        '(docs/settings.md, "The JVM of a bounded run")',
    )
    long_jvm_options: str = _setting(
        "-XX:+IgnoreUnrecognizedVMOptions -XX:TrimNativeHeapInterval=5000 -XX:MaxHeapFreeRatio=40"
        " -XX:MinHeapFreeRatio=10 -XX:G1PeriodicGCInterval=30000 -XX:ReservedCodeCacheSize=100m",
        "CEP_LONG_JVM_OPTIONS",
        "Spark: options of the JVM a run that watches its input (`cep run` without `--until-idle`) or "
        '`cep serve` starts; `none`: Spark\'s own (docs/settings.md, "The JVM of a long-lived run")',
    )
    jvm_archive: bool = _setting(
        True,
        "CEP_JVM_ARCHIVE",
        "Spark: a bounded `cep run`'s JVM maps a class-data sharing archive of Spark's classes, which "
        'the first such run makes (0: never; docs/settings.md, "The JVM of a bounded run")',
    )
    poll_ms: int = _setting(
        50,
        "CEP_POLL_MS",
        "Spark: how long a query that found no new input waits before it looks again (a latency of at "
        "most that much for the first event after a pause; lower costs CPU while idle)",
        1,
    )
    stop_timeout_s: float = _setting(
        10.0,
        "CEP_STOP_TIMEOUT",
        "Spark: seconds a stop waits for the micro-batches in progress before it cuts them short",
        0,
    )
    restart_base_s: float = _setting(
        2.0, "CEP_RESTART_BASE_S", "`cep serve`: the first wait before a failed deployment is restarted", 0
    )
    restart_max_s: float = _setting(
        120.0,
        "CEP_RESTART_MAX_S",
        "`cep serve`: the longest wait between restarts of a failing deployment",
        0,
    )
    trigger_clock: str | None = _setting(
        None,
        "CEP_TRIGGER_CLOCK",
        "test hook: `START/NOW` (ISO 8601 instants) is the clock triggers tick on instead of the machine's "
        '(docs/language.md, "Triggers")',
    )
    fault_after_commit: str | None = _setting(
        None,
        "CEP_FAULT_AFTER_COMMIT",
        "test hook, never in production: `TABLE:BATCH` kills the run after that Materialize commit",
    )
    fault_after_update: str | None = _setting(
        None,
        "CEP_FAULT_AFTER_UPDATE",
        "test hook, never in production: `QUERY:MARKER` fails one task after that UpdateSQL commits, once",
    )

    @property
    def advertised_host(self) -> str:
        return self.spark_host or self.spark_bind

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """The settings an environment gives; unset or blank variables take their defaults."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            text = env.get(f.metadata["env"], "").strip()
            if text:
                values[f.name] = _parse(f.metadata["env"], text, f.metadata["kind"], f.metadata["minimum"])
        return cls(**values)


def _parse(name: str, text: str, kind: type, minimum: float | None) -> Any:
    if kind is bool:
        if text.lower() in _ON or text.lower() in _OFF:
            return text.lower() in _ON
        raise SettingsError(f"{name}={text!r} is not a yes/no value (use 1 or 0)")
    if kind in (str, Path):
        return kind(text)
    try:
        value = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise SettingsError(f"{name}={text!r} is not {what}") from None
    if minimum is not None and value < minimum:
        raise SettingsError(f"{name}={text} must be at least {minimum:g}")
    return value


def current(env: Mapping[str, str] | None = None) -> Settings:
    """The settings of this process now (read again on every call: tests and embedding programs change
    the environment, and parsing a dozen variables is cheap next to what a caller does with them)."""
    env = os.environ if env is None else env
    return Settings.from_env(env)


def documented() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) of every setting, in declaration order, for docs/settings.md."""
    rows = []
    for f in fields(Settings):
        default = f.default
        shown = (
            "unset"
            if default is None
            else ("1" if default is True else "0" if default is False else str(default))
        )
        rows.append((f.metadata["env"], shown, f.metadata["doc"]))
    return rows
