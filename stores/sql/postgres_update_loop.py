"""UpdateSQL on Postgres in one statement per batch: the events' statements looped on the server.

`executemany` sends each event's statement on its own (Bind and Execute, and a result to read back,
per event), and an exactly-once batch then writes its ledger rows in a statement of their own. Here
a batch is one call of a PL/pgSQL function made once per connection, query and parameter types:

    CREATE FUNCTION pg_temp._cep_update_<digest>(deployment, operator, keys, sample, n, a1[], a2[]...)
      ... FOR i IN 1 .. n LOOP <the user's statement, each ? replaced by aK[i]>;
                               GET DIAGNOSTICS c = ROW_COUNT; counts[i] := c; END LOOP;
          INSERT INTO cep_ledger ... FROM unnest(keys, counts) ...   -- with keys only

so the values cross as one array per parameter (stores/sql/lateral.py's rewrite, with the types it
chooses: bigint for ints, the server's inference for text and NULLs), the statements run in order in
one transaction exactly as the events' own would, and the ledger write rides in the same statement.
With a `sample` of the keys, the function first looks them up in the ledger and returns NULL,
executing nothing, if any is there (a replay: stores/sql/postgres_update.py then claims around it).

Whatever this path cannot do falls back to `executemany`, which decides: an event whose data fails
(the whole call rolls back; the batch is redone with the failing events isolated), and a statement
the loop cannot hold (a RETURNING, with no destination in PL/pgSQL; a batch longer than the
statement timeout; no TEMP privilege), after which that query no longer tries the loop in this
process. The temporary function lives as long as its connection, and is nothing but the user's own
statement: the events' values are still only bound parameters.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from operators.graph import SqlQuery
from stores import ledger
from stores.errors import StoreError
from stores.sql.base import Row
from stores.sql.lateral import SelectText
from stores.sql.postgres_connection import TRANSIENT_STATES, event_failure, ledger_conflict, sqlstate_of
from stores.sql.postgres_read import PgReader

_TAG = "$_cep_body$"  # the function body's dollar quote; a query that holds it is not looped


@dataclass(frozen=True)
class LedgerArgs:
    """The ledger's part of a call: the scope, every event's key and the sample looked up first."""

    deployment: str
    operator: str
    keys: str  # Postgres array text (values.pg_text_array_literal)
    sample: str


def loop_function(name: str, st: SelectText, types: Sequence[str]) -> str:
    """The CREATE statement of the batch function for `st` with parameters of `types`.

    `types` come from `values.pg_array_type` or the server's `format_type`, never from events.
    """
    arrays = "".join(f", _cep_a{i} {t}[]" for i, t in enumerate(types, start=1))
    statement = st.substitute([f"_cep_a{i}[_cep_i]" for i in range(1, len(types) + 1)], escape_percent=False)
    table = ledger.TABLE
    # Newlines around the user's text: a trailing `-- comment` must not swallow our `;`.
    return f"""CREATE OR REPLACE FUNCTION pg_temp.{name}(
  _cep_d text, _cep_o text, _cep_k text[], _cep_s text[], _cep_n integer{arrays}
) RETURNS bigint[] LANGUAGE plpgsql AS {_TAG}
#variable_conflict use_column
DECLARE
  _cep_counts bigint[] := array_fill(0::bigint, ARRAY[_cep_n]);
  _cep_c bigint;
BEGIN
  IF _cep_s IS NOT NULL AND EXISTS (
    SELECT 1 FROM unnest(_cep_s) AS _cep_u(k) CROSS JOIN LATERAL (
      SELECT 1 FROM {table} _cep_l
      WHERE _cep_l.deployment = _cep_d AND _cep_l.operator = _cep_o AND _cep_l.key = _cep_u.k LIMIT 1
    ) AS _cep_x
  ) THEN
    RETURN NULL;
  END IF;
  FOR _cep_i IN 1 .. _cep_n LOOP
{statement}
;
    GET DIAGNOSTICS _cep_c = ROW_COUNT;
    _cep_counts[_cep_i] := _cep_c;
  END LOOP;
  IF _cep_k IS NOT NULL THEN
    INSERT INTO {table} (deployment, operator, key, affected)
    SELECT _cep_d, _cep_o, _cep_u.k, _cep_u.c FROM unnest(_cep_k, _cep_counts) AS _cep_u(k, c);
  END IF;
  RETURN _cep_counts;
END
{_TAG}"""


def _function_name(st: SelectText, types: Sequence[str]) -> str:
    digest = hashlib.sha256("\x00".join([st.text, *types]).encode("utf-8", "surrogatepass")).hexdigest()
    return f"_cep_update_{digest[:24]}"


@dataclass(frozen=True)
class LoopCall:
    """One batch's call, ready to run on the connection it was prepared on."""

    name: str
    types: tuple[str, ...]
    arrays: tuple[Any, ...]
    n: int

    def run(self, conn: psycopg.Connection[Any], led: LedgerArgs | None) -> list[int] | None:
        """The events' affected-row counts, or None when a sampled key is in the ledger already.
        One statement: on an autocommit connection, its own transaction."""
        casts = "".join(f", %s::{t}[]" for t in self.types)
        sql = f"SELECT pg_temp.{self.name}(%s::text, %s::text, %s::text[], %s::text[], %s::integer{casts})"
        head = (led.deployment, led.operator, led.keys, led.sample) if led else (None, None, None, None)
        row = conn.execute(sql, (*head, self.n, *self.arrays)).fetchone()
        counts = row[0] if row is not None else None
        return None if counts is None else [int(c) for c in counts]


class UpdateLoops:
    """The batch functions of one store: which queries cannot be looped, and which functions each
    connection already has."""

    def __init__(self, reader: PgReader) -> None:
        self.reader = reader  # its parsed texts and the parameter types the server inferred
        self._unfit: set[str] = set()
        self._made: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[str]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def prepare(
        self, conn: psycopg.Connection[Any], query: SqlQuery, params: Sequence[Row]
    ) -> LoopCall | None:
        """The call for this batch, its function made on `conn` if it has not got it yet; None when
        the query is not looped (then `executemany`). Errors of the server propagate; pass them to
        `give_up`."""
        if query.text in self._unfit or _TAG in query.text:
            return None
        try:
            st = self.reader.select(query.text)
            chosen, arrays = self.reader.param_arrays(query, list(zip(*params, strict=True)))
        except (ValueError, StoreError):  # not one statement, mixed value types, a NUL in text
            return None
        if not st.params:
            types: tuple[str, ...] = ()
        elif None in chosen:
            try:
                types = self.reader.param_types(conn, st, tuple(chosen))
            except ValueError:  # a parameter the server types as an array: text it parses itself
                self._refuse(query)
                return None
        else:
            types = tuple(t for t in chosen if t is not None)
        name = _function_name(st, types)
        with self._lock:
            made = self._made.setdefault(conn, set())
            known = name in made
        if not known:
            conn.execute(loop_function(name, st, types))  # autocommit: outside any batch's transaction
            with self._lock:
                made.add(name)
        return LoopCall(name, types, tuple(arrays), len(params))

    def give_up(self, query: SqlQuery, e: BaseException) -> bool:
        """Whether `e`, raised by `prepare` or a call, is the loop's own failure (a statement PL/pgSQL
        cannot hold, a batch over the statement timeout, no TEMP privilege): then the query is no
        longer looped and the batch goes through `executemany`, which fails as it always did if the
        statement itself is wrong. An event's data, the ledger's key, a lost connection or a
        transient error are not: the caller handles those as it does for `executemany`."""
        if not isinstance(e, psycopg.Error) or event_failure(e) or ledger_conflict(e):
            return False
        state = sqlstate_of(e)
        if state is None:  # refused by psycopg before sending (a value it cannot adapt), or lost
            if not isinstance(e, psycopg.ProgrammingError):
                return False
        elif state in TRANSIENT_STATES or state.startswith("08"):
            return False
        self._refuse(query)
        return True

    def _refuse(self, query: SqlQuery) -> None:
        """`query` is no longer looped in this process."""
        with self._lock:
            self._unfit.add(query.text)
