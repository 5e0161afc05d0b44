"""Materialize on Postgres at COPY speed: binary COPY for appends, a staged COPY for upserts.

`executemany` of one INSERT per row costs ~65,000-87,000 rows/s on this kind of machine, binary
COPY ~2 million (DESIGN.md, "Figures"). So the fast path of a Materialize batch is:

- append (no primary key): `COPY table (columns) FROM STDIN (FORMAT BINARY)`;
- upsert: COPY the rows into a session-private staging table, then one
  `INSERT INTO table SELECT ... FROM stage ON CONFLICT (key) DO UPDATE`.

Both run inside the caller's transaction, after its ledger claim, so the ledger entry and the rows
still commit or roll back together (stores/ledger.py).

Same result as executing the rows one by one, in order:

- An upsert statement may not touch one row twice, so a batch where a key occurs several times is
  written in *generations*: the first occurrence of every key, then the second, and so on, each as
  one statement. Rows of one key keep their order; rows of different keys do not interact. Past
  `MAX_GENERATIONS` occurrences of one key the caller's row-by-row path is cheaper.
- A row the server refuses (a NOT NULL or CHECK, a string too long) fails the whole COPY; the caller
  then redoes the batch row by row with savepoints, which names the failing rows (`sql.isolate`).
  Binary COPY applies the column's type modifier on input as an INSERT does, so the same rows fail.

The staging table is `CREATE TEMP TABLE ... AS SELECT <columns> FROM <table> WITH NO DATA`: the
exact column types of the target, none of its constraints (they apply at the INSERT), and
`ON COMMIT DELETE ROWS`, so it is empty at the start of every transaction on that connection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import psycopg
from psycopg import sql

from stores.schema import canonical_type
from stores.sql import MaterializePlan, Row

MAX_GENERATIONS = 16
GEN = "__cep_gen"

# The psycopg binary dumper for each column type (stores.schema.canonical_type spelling). A varchar
# column takes text's binary form; the server applies the length limit on input.
_COPY_TYPES = {
    "boolean": "bool",
    "integer": "int4",
    "bigint": "int8",
    "double": "float8",
    "timestamp with time zone": "timestamptz",
}


def copy_type(canonical: str) -> str:
    if canonical in _COPY_TYPES:
        return _COPY_TYPES[canonical]
    if canonical.startswith("decimal"):
        return "numeric"
    if canonical.startswith(("varchar", "char", "text")):
        return "text"
    raise ValueError(f"no COPY type for column type {canonical}")


@dataclass(frozen=True)
class BulkPlan:
    """The statements of one (table, columns) pair, composed once with quoted identifiers."""

    types: tuple[str, ...]  # psycopg type names, in the order rows are written
    copy: sql.Composed  # COPY <target or stage> (columns) FROM STDIN (FORMAT BINARY)
    key_at: tuple[int, ...]  # positions of the primary key in a written row; () for appends
    create_stage: sql.Composed | None = None
    upsert: sql.Composed | None = None  # INSERT ... SELECT FROM stage ON CONFLICT ...
    upsert_generation: sql.Composed | None = None  # the same, for one generation (%s)


def bulk_plan(plan: MaterializePlan) -> BulkPlan:
    t = plan.table
    names = list(plan.columns)  # the order values are built in (placeholder order)
    types = tuple(copy_type(canonical_type(t.c[n].type, "postgresql")) for n in names)
    cols = sql.SQL(", ").join(sql.Identifier(n) for n in names)
    target = sql.Identifier(t.name)
    pk = [c.name for c in t.primary_key.columns]
    if not pk:
        return BulkPlan(types, sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(target, cols), ())
    digest = hashlib.sha256("\x00".join([t.name, *names]).encode()).hexdigest()[:16]
    stage = sql.Identifier(f"cep_stage_{digest}")
    rest = [n for n in names if n not in pk]
    conflict = sql.SQL(", ").join(sql.Identifier(k) for k in pk)
    action: sql.Composable
    if rest:
        action = sql.SQL("DO UPDATE SET {}").format(
            sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in rest)
        )
    else:
        action = sql.SQL("DO NOTHING")
    insert = sql.SQL("INSERT INTO {t} ({cols}) SELECT {cols} FROM {stage}").format(t=target, cols=cols, stage=stage)
    tail = sql.SQL(" ON CONFLICT ({}) {}").format(conflict, action)
    return BulkPlan(
        types=(*types, "int4"),
        copy=sql.SQL("COPY {} ({}, {}) FROM STDIN (FORMAT BINARY)").format(stage, cols, sql.Identifier(GEN)),
        key_at=tuple(names.index(k) for k in pk),
        create_stage=sql.SQL(
            "CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS"
            " SELECT {cols}, NULL::integer AS {gen} FROM {t} WITH NO DATA"
        ).format(stage=stage, cols=cols, gen=sql.Identifier(GEN), t=target),
        upsert=insert + tail,
        upsert_generation=insert + sql.SQL(" WHERE {} = %s").format(sql.Identifier(GEN)) + tail,
    )


def generations(rows: Sequence[Row], key_at: tuple[int, ...]) -> list[int] | None:
    """Per row, the how-many-th occurrence of its key it is (1, 2, ...); None when every key is new.

    Raises `TooManyGenerations` when one key occurs more than MAX_GENERATIONS times.
    """
    key = itemgetter(*key_at)
    keys = list(map(key, rows))
    if len(set(keys)) == len(keys):
        return None
    seen: dict[Any, int] = {}
    out: list[int] = []
    for k in keys:
        g = seen.get(k, 0) + 1
        seen[k] = g
        out.append(g)
    if max(out) > MAX_GENERATIONS:
        raise TooManyGenerations(max(out))
    return out


class TooManyGenerations(Exception):
    pass


def write(conn: psycopg.Connection[Any], bp: BulkPlan, rows: Sequence[Row]) -> None:
    """Write the rows inside the connection's current transaction (not in pipeline mode)."""
    cur = conn.cursor()
    if bp.create_stage is None:
        with cur.copy(bp.copy) as cp:
            cp.set_types(list(bp.types))
            for r in rows:
                cp.write_row(r)
        return
    assert bp.upsert is not None and bp.upsert_generation is not None
    gens = generations(rows, bp.key_at)
    cur.execute(bp.create_stage)
    with cur.copy(bp.copy) as cp:
        cp.set_types(list(bp.types))
        if gens is None:
            for r in rows:
                cp.write_row((*r, 1))
        else:
            for r, g in zip(rows, gens, strict=True):
                cp.write_row((*r, g))
    if gens is None:
        cur.execute(bp.upsert)
    else:
        for g in range(1, max(gens) + 1):
            cur.execute(bp.upsert_generation, (g,))
