"""Helpers for the store tests (a module of its own, not conftest: `from conftest import` would pick
whichever conftest.py pytest imported last).

Setup SQL is executed with the plain drivers (sqlite3, psycopg), not with the code under test.
"""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import threading
from dataclasses import dataclass

import psycopg

from operators.graph import SqlQuery
from operators.sqltext import analyze
from stores.retry import RetryPolicy
from stores.sql.store import SqlStore
from stores.urls import StoreURL

# Store tests that take a server away wait milliseconds between attempts, not seconds.
FAST_RETRY = RetryPolicy(base_s=0.02)


@dataclass
class Backend:
    kind: str  # "sqlite" | "postgresql"
    url: StoreURL
    store: SqlStore

    def execute(self, *statements: str) -> None:
        """Run setup statements directly with the driver."""
        if self.kind == "sqlite":
            assert self.url.database is not None
            with sqlite3.connect(self.url.database) as conn:
                for s in statements:
                    conn.execute(s)
            conn.close()
        else:
            with psycopg.connect(self.url.libpq_conninfo(), autocommit=True) as pg:
                for s in statements:
                    pg.execute(s)

    def fetch(self, sql: str) -> list[tuple[object, ...]]:
        if self.kind == "sqlite":
            assert self.url.database is not None
            conn = sqlite3.connect(self.url.database)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()
        with psycopg.connect(self.url.libpq_conninfo(), autocommit=True) as pg:
            return pg.execute(sql).fetchall()


def query(text: str, name: str = "q", store: str = "crm", returns: object = None) -> SqlQuery:
    info = analyze(text)
    return SqlQuery(name, store, text, info.kind, len(info.params), returns)  # type: ignore[arg-type]


class TcpProxy:
    """A TCP forwarder to a real server that a test can take down and bring back on the same port.

    `down()` stops listening (connections are refused) and cuts every open connection, as a server
    restart does; `kill_connections()` only cuts them (pooled connections go stale).
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.accepted = 0
        self.up()

    def up(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        listener.settimeout(0.05)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self.kill_connections()

    def kill_connections(self) -> None:
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self.down()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            with self._lock:
                self.accepted += 1
                self._socks += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
