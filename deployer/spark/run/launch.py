"""The JVM of a run, started in a thread while the run imports what it runs with.

`cep run` used to import the deployment's modules (PySpark's SQL, pandas, pyarrow, the translation:
0.7 to 1.0 s on the machine of the README's figures) and only then start the JVM, whose start (2 to
3 s) leaves a core idle meanwhile; `deployer.spark.engine` now starts the JVM first
(`launch`), once nothing can refuse the run any more (its bindings and its checkpoint are checked),
and `session.spark_session` waits for it (`Launched.wait`) with the options it was started with.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from pyspark import SparkContext

from deployer.spark.run.session import session_options, start_jvm


@dataclass
class Launched:
    """A JVM being started in `thread` with `options`; `failed` holds what stopped it."""

    options: dict[str, str]
    thread: threading.Thread
    failed: list[BaseException] = field(default_factory=list)

    def wait(self) -> dict[str, str]:
        """The JVM's options once it is up; what stopped it, raised here."""
        self.thread.join()
        if self.failed:
            raise self.failed[0]
        return self.options


def launch(master: str | None, log: Path, bounded: bool, app: str = "paascep") -> Launched | None:
    """Start the JVM `session.spark_session(master, app, log, bounded)` would start, in a thread;
    None when this process has one already (that call then uses it)."""
    if SparkContext._gateway is not None:
        return None
    options = session_options(master, app)
    failed: list[BaseException] = []

    def start() -> None:
        try:
            start_jvm(options, bounded, log)
        except BaseException as err:  # given to the run where it waits for the JVM
            failed.append(err)

    thread = threading.Thread(target=start, name="cep-jvm-launch", daemon=True)
    thread.start()
    return Launched(options, thread, failed)
