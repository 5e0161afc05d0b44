"""The requester's end of worker_path/cep_zygote.py, which worker_path/sitecustomize.py runs at the
start of every fresh Python process a local `cep` JVM starts (`delegate`): the zygote's socket, the
modules it stands in for, and the request.

A module of its own, importing only what sending the request needs, because every such process pays
for what it imports before it asks: the zygote's end (its typing, traceback, importlib, contextlib)
cost each requester ~5 ms more at every query's start, once per Python source and stateful operator
(docs/architecture.md, "A query start's fresh Python processes are forked").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

TYPE_CHECKING = False  # typing's own costs the import this module avoids; mypy takes it as typing's
if TYPE_CHECKING:
    from collections.abc import Mapping

MODULES = (
    "pyspark.sql.streaming.python_streaming_source_runner",
    "pyspark.sql.streaming.transform_with_state_driver_worker",
    # The daemons themselves, when the zygote is up before them (`early`): the executor's
    # (cep_daemon) and the one the driver's runners fork from (`pyspark.daemon`, started for the
    # first Python data source a query reads: `pyspark.sql.worker.create_data_source`).
    "cep_daemon",
    "pyspark.daemon",
    "pyspark.sql.worker.create_data_source",
)
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
SOCKET_NAME = "cep-zygote.sock"


def socket_path(environ: Mapping[str, str] = os.environ) -> str | None:
    """The zygote's socket in the session's private directory of worker sockets, None without one
    (a cluster, CEP_PYTHON_UDS=0: deployer.spark.run.session.python_worker_conf)."""
    directory = environ.get("PYTHON_WORKER_FACTORY_SOCK_DIR")
    if not directory:
        path = environ.get("PYTHON_WORKER_FACTORY_SOCK_PATH")
        directory = os.path.dirname(path) if path else None
    return os.path.join(directory, SOCKET_NAME) if directory else None


def delegate(path: str, module: str, args: list[str]) -> None:
    """Have the zygote at `path` run `module` with `args` in this process's stead, and exit with its
    status; return (having sent nothing) when there is no zygote to ask."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        conn.close()
        return
    ignored = [sig for sig in _FORWARDED if signal.getsignal(sig) == signal.SIG_IGN]
    request = json.dumps(
        {
            "module": module,
            "args": args,
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "path": sys.path,
            "python": _interpreter(),
            # what it ignores, its child ignores (the JVM starts its processes with SIGINT ignored:
            # a terminal's Ctrl-C to the group is the driver's to handle, not its workers')
            "ignored": [int(sig) for sig in ignored],
        }
    ).encode("utf-8", "surrogateescape")
    # The signals are caught from before the request: one that comes before the child's pid is
    # known (Spark may stop a worker the moment it started) is passed on once it is.
    child, pending = 0, list[int]()

    def forward(signum: int, _frame: object) -> None:
        if not child:
            pending.append(signum)
            return
        try:  # noqa: SIM105 - contextlib is an import the requester does without
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    before = {sig: signal.signal(sig, forward) for sig in _FORWARDED if sig not in ignored}
    try:
        socket.send_fds(conn, [len(request).to_bytes(8, "big")], [0, 1, 2])
        conn.sendall(request)
        replies = conn.makefile("rb")
        first = replies.readline().split()
    except OSError:
        first = []
    if len(first) != 2 or first[0] != b"pid":  # refused, or the zygote ending: it forked nothing
        conn.close()
        for forwarded, handler in before.items():
            signal.signal(forwarded, handler)
        for signum in pending:  # what this process would have done with them: start no module
            os.kill(os.getpid(), signum)
        return
    child = int(first[1])
    for signum in pending:
        forward(signum, None)
    last = replies.readline().split()
    if len(last) == 2 and last[0] == b"exit":
        _exit_as(int(last[1]))
    while _alive(child):  # the zygote ended first: wait for the child itself
        time.sleep(0.05)
    os._exit(0)


def _interpreter() -> list[object]:
    """What a child must run on to stand in for its requester: the same environment and version."""
    return [sys.prefix, sys.hexversion]


def _exit_as(code: int) -> None:
    """Exit with the child's status: its code, or the signal that ended it (a negative code)."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)  # the signal is delivered meanwhile
    os._exit(code & 0xFF)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
