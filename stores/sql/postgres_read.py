"""ReadSQL on Postgres: a batch of events in one round trip, in a read-only transaction.

Batched reads bind one array per parameter (stores/sql/lateral.py). The element type of each array:

- from the Python values when they are typed: bool → boolean, int → bigint, float → double
  precision, Decimal → numeric, datetime → timestamptz (`values.pg_array_type`), which is what
  psycopg would send for one event, so `idcaller = p.a1` with an integer column and a bigint
  parameter type-checks (and uses the index) exactly as a per-event execution does;
- from the server when the values are str or all None: psycopg sends a str or a None untyped and
  Postgres infers its type from the query, so we do the same once per (query, type signature):
  PREPARE the user's query with those parameters declared `unknown` and read the types Postgres
  chose. `WHERE idcaller = ?` with only NULLs in the batch thus binds an integer[] of NULLs, where a
  text[] would fail with "operator does not exist: integer = text"; and `idcaller = ?` with the str
  '42' works as it does for one event. A parameter the server cannot type (`? IS NULL`, where
  psycopg itself fails for one event) is declared text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from operators.graph import SqlQuery
from stores.api import ReadColumns, columns_of, rows_of
from stores.errors import NUL_IN_TEXT, StoreError
from stores.sql.base import Row
from stores.sql.lateral import SelectText, describe_statements, lateral_query, select_text
from stores.sql.postgres_connection import PgConnections
from stores.values import coerce_column, from_db, normalize_row, pg_array_literal, pg_array_type

_CACHE_LIMIT = 1024
_PARAM_NUMBER = re.compile(r"\$(\d+)")


class PgReader:
    """The reads of one store, with what it learnt of its queries: their parsed text, and the
    parameter types the server inferred."""

    def __init__(self, db: PgConnections) -> None:
        self.db = db
        self._selects: dict[str, SelectText] = {}
        self._types: dict[tuple[str, tuple[str | None, ...]], tuple[str, ...]] = {}

    def read(self, query: SqlQuery, params: Sequence[Row]) -> list[list[Row]]:
        if not params:
            return []
        st, rows = self._read_rows(query, list(zip(*params, strict=True)), len(params), outer=False)
        out: list[list[Row]] = [[] for _ in params]
        end = -1 if st.ordered else None
        types = query.result_types
        for r in rows:
            row = normalize_row(tuple(r[1:end]))
            if types is not None and len(types) == len(row):
                row = tuple(from_db(v, t) for v, t in zip(row, types, strict=True))
            out[r[0] - 1].append(row)
        return out

    def read_columns(
        self, query: SqlQuery, columns: Sequence[Sequence[Any]], n: int, *, width: int, outer: bool = False
    ) -> ReadColumns:
        """`read` for a batch given column by column, its result column by column (see ReadColumns).

        The same query as `read`; with `outer` the server adds the NULL row of an event without
        result rows (LEFT JOIN LATERAL). No Python object is made per result row: the rows are
        transposed at C speed and a column is coerced one value at a time only when it needs it.
        """
        if n == 0:
            return ReadColumns([], [[] for _ in range(width)])
        st, rows = self._read_rows(query, columns, n, outer=outer)
        if not rows:
            return ReadColumns([], [[] for _ in range(width)])
        # One column at a time with itemgetter, not zip(*rows): zip makes an iterator per row, and
        # 10,000 short-lived container objects per batch set off the garbage collector's full
        # collections (a visible share of the read when profiled in a Spark worker).
        got = len(rows[0]) - 1 - (1 if st.ordered else 0)
        if got != width:
            # Rows of another shape than ON SQL names (a query the store did not describe): each
            # event with rows is refused (stores.api.columns_of). With `outer`, the server's NULL
            # row of an event without rows looks like a real one, so the events' rows are read again
            # one list per event; a script in this state refuses every event that has rows anyway.
            return columns_of(self.read(query, rows_of(columns, n)), query, width, outer)
        transposed = [list(map(itemgetter(j), rows)) for j in range(len(rows[0]))]
        types = query.result_types
        typed = types if types is not None and len(types) == got else None
        out = [
            coerce_column(transposed[1 + j], typed[j] if typed is not None else None) for j in range(width)
        ]
        return ReadColumns(list(map((-1).__add__, transposed[0])), out)

    def _read_rows(
        self, query: SqlQuery, columns: Sequence[Sequence[Any]], n: int, *, outer: bool
    ) -> tuple[SelectText, list[Any]]:
        """The batched query's rows: (event ordinal from 1, the query's columns..., [row number])."""
        try:
            st = self.select(query.text)
        except ValueError as e:
            raise self.db.query_error(f"query {query.name}: {e}") from None
        types, arrays = self.param_arrays(query, columns)

        def body(conn: psycopg.Connection[Any]) -> list[Any]:
            final = self.param_types(conn, st, tuple(types)) if None in types else types
            sql = lateral_query(st, [t for t in final if t is not None], outer=outer)
            bind: list[Any] = list(arrays) if st.params else [n]
            with conn.pipeline(), conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                cur = conn.execute(sql, bind)
            return cur.fetchall()

        try:
            # No batch size in the message: the same error reads the same on both engines, whatever
            # the batches (the reference executor reads one event at a time).
            rows = self.db.run(f"query {query.name}", body, write=False)
        except StoreError:
            self._types = {k: v for k, v in self._types.items() if k[0] != st.text}  # may be stale
            raise
        return st, rows

    def param_arrays(
        self, query: SqlQuery, columns: Sequence[Sequence[Any]]
    ) -> tuple[list[str | None], list[Any]]:
        """Each parameter's element type (None: the server's to infer) and the array to bind."""
        types: list[str | None] = []
        arrays: list[Any] = []
        for i, column in enumerate(columns):
            try:
                t, values = pg_array_type(list(column))
            except TypeError as e:
                raise self.db.query_error(f"query {query.name}, parameter {i + 1}: {e}") from None
            if t is None and any("\x00" in v for v in values if v is not None):
                # psycopg refuses the whole batch for it; Spark finds these events beforehand
                # (deployer.spark.datastores.sql._unsendable), so this is the reference executor's one event
                raise self.db.query_error(
                    f"query {query.name}, parameter {i + 1}: {NUL_IN_TEXT}", about_event=True
                )
            types.append(t)
            arrays.append(pg_array_literal(values) if t == "bigint" else values)
        return types, arrays

    def select(self, text: str) -> SelectText:
        st = self._selects.get(text)
        if st is None:
            st = select_text(text)
            if len(self._selects) >= _CACHE_LIMIT:
                self._selects.clear()
            self._selects[text] = st
        return st

    def param_types(
        self,
        conn: psycopg.Connection[Any],
        st: SelectText,
        types: tuple[str | None, ...],
    ) -> tuple[str, ...]:
        """Fill in the types the Python values left open (None) with the server's inference."""
        key = (st.text, types)
        found = self._types.get(key)
        if found is not None:
            return found
        declared = [t or "unknown" for t in types]
        while True:
            try:
                got = self._describe(conn, st, declared)
                break
            except pg_errors.IndeterminateDatatype as e:
                # e.g. `? IS NULL`: nothing in the query says what that parameter is, and Postgres
                # names the first such one ($N). It becomes text; then look again.
                m = _PARAM_NUMBER.search(e.diag.message_primary or "")
                i = int(m.group(1)) - 1 if m else -1
                if 0 <= i < len(declared) and declared[i] == "unknown":
                    declared[i] = "text"
                elif "unknown" in declared:
                    declared = ["text" if d == "unknown" else d for d in declared]
                else:
                    raise
        arrays = [t for t in got if t.endswith("]")]
        if arrays:
            raise ValueError(f"array-typed parameters ({', '.join(arrays)}) are not supported")
        if len(self._types) >= _CACHE_LIMIT:
            self._types.clear()
        self._types[key] = got
        return got

    def _describe(
        self, conn: psycopg.Connection[Any], st: SelectText, declared: list[str]
    ) -> tuple[str, ...]:
        prepare, read_types, deallocate = describe_statements(st, declared)
        with conn.pipeline():
            conn.execute(prepare)
            cur = conn.execute(read_types)
            conn.execute(deallocate)
        row = cur.fetchone()
        if row is None:  # pragma: no cover - the PREPARE above succeeded
            raise RuntimeError("prepared statement vanished")
        return tuple(row[0])
