"""Fresh Python processes of a local `cep` JVM, forked from one that has imported what they import.

At every query start Spark runs a new Python process, not forked from a daemon, per Python source
(`python_streaming_source_runner`: offsets) and per Python stateful processor
(`transform_with_state_driver_worker`: its state's schema), one after the other. Each spent most of
its 0.2-0.3 s importing PySpark, pyarrow and the project's modules before its first message (a `cep
run` of examples/daily_bill.cpl starts four per query; the test suite some thousands).

This module is both ends of a way round that:

- `serve` runs in a process forked from worker_path/cep_daemon.py once the daemon has imported
  what its workers need (`start`): a process the same JVM started, so with the same environment,
  and with the modules already imported, at no cost of its own. It listens on a Unix socket in the
  session's private socket directory and forks a child per request: the child takes
  the requester's standard streams, environment, path, working directory and arguments, and runs
  the module as `python -m` would;
- `delegate` (called by worker_path/sitecustomize.py at the start of such a process) sends that
  request, passes on the signals it gets (Spark stops a worker with SIGTERM), and exits with the
  child's status. The child connects to the JVM itself and tells it its own pid, as the module does.
  A requester ended by a signal it cannot pass on (SIGKILL, an out-of-memory kill) closes its
  connection as it dies, and the zygote kills its child (`_abandoned`), which nothing would stop.

Anything missing (no socket directory, the zygote not started yet, a refused connection) and the
process starts as it always did. Only the modules in `MODULES` are delegated.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Collection, Iterable
from typing import Any

if __package__:  # imported by the driver, as part of the project (`spawn`)
    from deployer.spark.run.worker_path.cep_request import MODULES, SOCKET_NAME, _interpreter, socket_path
else:  # run from worker_path, as the zygote and the daemons are, where each module is on its own
    from cep_request import MODULES, SOCKET_NAME, _interpreter, socket_path  # type: ignore[no-redef]

# what the fresh processes import besides the daemon's workers' modules (cep_daemon.PRELOADED)
PRELOADED = (
    *MODULES,
    "deployer.spark.streams.redis_source",
    "deployer.spark.streams.trigger_source",
    "deployer.spark.output.processor",
)
LOCK_NAME = "cep-zygote.lock"  # whoever creates it starts the zygote; the driver, to have none
_REQUEST_TIMEOUT_S = 5.0


# --------------------------------------------------------------------------------------------------
# The zygote's end


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    conn.settimeout(_REQUEST_TIMEOUT_S)
    head, fds, _flags, _addr = socket.recv_fds(conn, 8, 3)
    if len(head) != 8 or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("a malformed request")
    size, data = int.from_bytes(head, "big"), b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ValueError("a truncated request")
        data += chunk
    return json.loads(data.decode("utf-8", "surrogateescape")), fds


def _run_child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become the process that asked, run its module, never return."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = request["path"]
        sys.argv = [request["module"], *request["args"]]
        # As `python -m` runs it: as __main__ only (the zygote imported it, for what it imports);
        # runpy would otherwise warn, on the JVM's log, that it is already imported.
        sys.modules.pop(request["module"], None)
        import runpy

        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def preload(names: Iterable[str] | None = None) -> None:
    """Import `names` (default: PRELOADED) ahead, for the processes forked from this one."""
    for name in PRELOADED if names is None else names:
        try:
            importlib.import_module(name)
        except Exception:  # the process that needs it imports it, and says what failed
            continue


def serve(path: str, parent: int | None = None) -> None:
    """Fork a child per request on `path` until `parent` ends (default: the process this one was
    forked from)."""
    parent = os.getppid() if parent is None else parent
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    os.rename(path + ".new", path)  # requesters find it only once it listens
    listener.listen(64)
    # each running child's requester's connection, by the child's pid
    waiting: dict[int, socket.socket] = {}
    try:
        while os.getppid() == parent and os.path.exists(path):  # its directory removed: the session's end
            ready = _readable([listener.fileno(), wake_r, *(c.fileno() for c in waiting.values())], 0.5)
            if wake_r in ready:
                os.read(wake_r, 512)
            if listener.fileno() in ready:
                conn, _ = listener.accept()
                _fork_for(conn, listener, waiting, (wake_r, wake_w))
            _abandoned(waiting, {fd for fd in ready if fd not in (wake_r, listener.fileno())})
            _reap(waiting)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _fork_for(
    conn: socket.socket, listener: socket.socket, waiting: dict[int, socket.socket], wake: tuple[int, int]
) -> None:
    """Fork a child for the request on `conn`, which then waits for its end (`waiting`); or, if the
    request is malformed, from another Python, or no process is to be had, close `conn`: the
    requester starts as it always did."""
    try:
        request, fds = _receive(conn)
    except (OSError, ValueError):
        conn.close()
        return
    pid = -1
    if request.get("python") == _interpreter():  # another Python: it starts as it would
        _archives_opened(request.get("path"))
        with contextlib.suppress(OSError):
            pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _ignore(request.get("ignored"))
        for c in (listener, conn, *waiting.values()):
            c.close()
        for fd in wake:
            os.close(fd)
        _run_child(request, fds)
    for fd in fds:
        os.close(fd)
    if pid < 0:
        conn.close()
        return
    waiting[pid] = conn
    try:
        conn.sendall(f"pid {pid}\n".encode())
    except OSError:  # the requester is gone already (stopped as it started): so is its child
        _abandoned(waiting, {conn.fileno()})


def _ignore(signums: Any) -> None:
    """In the child: ignore what its requester ignored, as a process started in its stead would.
    The JVM starts its processes with SIGINT ignored, in the driver's process group: a terminal's
    Ctrl-C is the driver's to handle (a graceful stop), and a source's planner it killed would fail
    the query the driver is stopping."""
    for signum in signums if isinstance(signums, list) else []:
        with contextlib.suppress(ValueError, TypeError, OSError):
            signal.signal(signum, signal.SIG_IGN)


def _archives_opened(path: Any) -> None:
    """Open a request's archives here, once, for its children to inherit (~27 ms each otherwise)."""
    import pkgutil  # the zygote's alone: not the requester's, which imports this module at its start

    known = sys.path_importer_cache
    for entry in path if isinstance(path, list) else []:
        if isinstance(entry, str) and entry not in known and os.path.isabs(entry) and os.path.isfile(entry):
            with contextlib.suppress(Exception):  # a child that needs it tries, as it would have
                pkgutil.get_importer(entry)  # made and kept in sys.path_importer_cache


def _abandoned(waiting: dict[int, socket.socket], readable: Collection[int]) -> None:
    """Kill the children whose requester's connection is among the `readable` and at its end: the
    requester was stopped in a way it could not pass on (SIGKILL), and nothing would stop its child.
    (A requester sends nothing after its request: readable means closed.)"""
    for pid, conn in list(waiting.items()):
        if conn.fileno() not in readable:
            continue
        try:
            if conn.recv(64, socket.MSG_DONTWAIT):
                continue
        except BlockingIOError:
            continue
        except OSError:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        del waiting[pid]
        conn.close()


def _readable(fds: list[int], timeout_s: float) -> set[int]:
    """Which of `fds` are readable (or closed) within `timeout_s` (poll: no limit on an fd's number)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return {fd for fd, _events in poller.poll(int(timeout_s * 1000))}


def _reap(waiting: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            conn.close()


def _locked(path: str) -> bool:
    """Take the lock of the zygote of socket `path`: False if another has it (one per directory)."""
    try:
        os.close(
            os.open(
                os.path.join(os.path.dirname(path), LOCK_NAME), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600
            )
        )
    except OSError:
        return False
    return True


def start(environ: Any = os.environ) -> None:
    """Fork this session's zygote from the calling process (the daemon, its modules imported), once
    per socket directory; the zygote ends with the process it was forked from."""
    path = socket_path(environ)
    if path is None:
        return
    if not _locked(path):  # one zygote per directory: whoever creates the lock starts it
        return
    preload()
    gc.freeze()  # as the daemon does: the children's collections skip what they inherit
    if os.fork() != 0:
        return
    code = 0
    try:
        # Left in the JVM's process group and session, as the processes it stands in for are (not a
        # session of its own: the kernel's autogroup scheduling then set its children's CPU share
        # apart from the JVM's); the daemon makes its own group after this fork. A terminal's
        # Ctrl-C reaches the children as it reached those processes; the zygote ends with its parent.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        serve(path)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def spawn(directory: str | None, log: Any) -> None:
    """Start the zygote of a local session's socket `directory` (`early`) before its JVM, from the
    driver (deployer.spark.run.session.launch_jvm), unless it is taken (CEP_PYTHON_ZYGOTE=0): it
    imports what the Python processes import while the JVM starts, where the daemon's zygote came up
    2 to 3 s after the session, past the first processes a deployment's start needs (the first
    Python data source's daemon, the executor's daemon). On the Python Spark gives its workers,
    with the hash seed it gives them; its output goes to `log`, the JVM's."""
    if not directory or os.path.exists(os.path.join(directory, LOCK_NAME)):
        return
    import subprocess

    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    with open(log, "ab") as out:  # its output, and its children's errors before they take over theirs
        subprocess.Popen(
            [python, "-m", "cep_zygote", directory, str(os.getpid())],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def early(directory: str, driver: int) -> None:
    """The zygote of a local session's socket `directory`, started by the driver (pid `driver`)
    before its JVM (`spawn`), so that it is up before the first process it stands
    in for: it imports what the daemons' workers and the fresh processes import while the JVM
    starts, then forks them all, the daemons themselves included. It ends with the driver, or when
    the directory goes (the session's end). The driver is named, not found as the parent once the
    imports are done: a driver killed meanwhile (a second or two) left a zygote whose parent was
    already init, which nothing ended (160 MB each)."""
    path = os.path.join(directory, SOCKET_NAME)
    if os.getppid() != driver or not _locked(path):
        return
    import cep_daemon

    preload(cep_daemon.PRELOADED)
    preload()
    gc.freeze()  # as the daemon does: the children's collections skip what they inherit
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the driver's to handle
    serve(path, driver)


if __name__ == "__main__":
    early(sys.argv[1], int(sys.argv[2]))
