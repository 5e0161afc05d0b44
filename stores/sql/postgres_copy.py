"""Materialize on Postgres at COPY speed: binary COPY for appends, a staged COPY for upserts.

`executemany` of one INSERT per row costs ~65,000-87,000 rows/s on this kind of machine, binary
COPY ~2 million (docs/architecture.md, "Figures"). So the fast path of a Materialize batch is:

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
  then redoes the batch row by row with savepoints, which names the failing rows (`base.isolate`).
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

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql

from stores.schema import canonical_type
from stores.sql.base import MaterializePlan, Row

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
    insert = sql.SQL("INSERT INTO {t} ({cols}) SELECT {cols} FROM {stage}").format(
        t=target, cols=cols, stage=stage
    )
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


# ---------------------------------------------------------------------------------------------
# Arrow batches straight to binary COPY

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"  # flags, no extension
_TRAILER = b"\xff\xff"
_NULL = b"\xff\xff\xff\xff"  # a field of length -1
_EMPTY = pa.scalar(b"", pa.large_binary())  # the separator of binary_join_element_wise
_PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 in Unix microseconds: binary timestamps count from it

# For each COPY type: the Arrow type a column is cast to, and the big-endian numpy type of its value.
_FIXED: dict[str, tuple[pa.DataType, str]] = {
    "bool": (pa.bool_(), "u1"),
    "int4": (pa.int32(), ">i4"),
    "int8": (pa.int64(), ">i8"),
    "float8": (pa.float64(), ">f8"),
    "timestamptz": (pa.int64(), ">i8"),
}


def encode_arrow(table: pa.Table, plan: MaterializePlan, bp: BulkPlan) -> bytes | None:
    """The whole binary COPY stream (signature, rows, trailer) of an Arrow batch, built with Arrow
    and numpy kernels: no Python object per value. Field k of a row is column `plan.order[k]`.

    None when a column has no vectorised encoding (numeric) or does not cast safely to its column's
    type (e.g. an out-of-range integer): the caller then takes the row path, where the server
    reports the offending rows one by one.
    """
    n = table.num_rows
    fields: list[pa.Array] = []
    try:
        for k, i in enumerate(plan.order):
            fields.append(_encode_column(table.column(i).combine_chunks(), bp.types[k], n))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, _NotVectorised):
        return None
    if bp.create_stage is not None:  # the staging table's generation column: always 1 here
        fields.append(pa.array([b"\x00\x00\x00\x04\x00\x00\x00\x01"] * n, pa.large_binary()))
    count = pa.array([len(fields).to_bytes(2, "big")] * n, pa.large_binary())
    rows = pc.binary_join_element_wise(count, *fields, _EMPTY)
    # No row is NULL, so the rows are the data buffer between the first and the last offset.
    _, offsets_buf, data = rows.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=n + 1, offset=rows.offset * 8)
    body = memoryview(data)[int(offsets[0]) : int(offsets[n])].tobytes() if data is not None else b""
    return _SIGNATURE + body + _TRAILER


class _NotVectorised(Exception):
    pass


def _encode_column(col: pa.Array, copy_type: str, n: int) -> pa.Array:
    """Each value as a binary COPY field (int32 length, then the value), NULL as length -1."""
    if copy_type in _FIXED:
        arrow_type, np_type = _FIXED[copy_type]
        if copy_type == "timestamptz":
            if not pa.types.is_timestamp(col.type):
                raise _NotVectorised(copy_type)
            col = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        else:
            col = col.cast(arrow_type)  # safe: raises on overflow or loss
        values = col.fill_null(False if copy_type == "bool" else 0).to_numpy(zero_copy_only=False)
        if copy_type == "timestamptz":
            values = values - _PG_EPOCH_US
        width = np.dtype(np_type).itemsize
        packed = np.empty(n, dtype=[("len", ">i4"), ("value", np_type)])
        packed["len"] = width
        packed["value"] = values
        encoded = pa.Array.from_buffers(pa.binary(4 + width), n, [None, pa.py_buffer(packed.tobytes())])
        encoded = encoded.cast(pa.large_binary())
    elif copy_type == "text":
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            raise _NotVectorised(copy_type)
        values = col.cast(pa.large_binary())
        lengths = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(">i4")
        prefix = pa.Array.from_buffers(pa.binary(4), n, [None, pa.py_buffer(lengths.tobytes())])
        encoded = pc.binary_join_element_wise(prefix.cast(pa.large_binary()), values, _EMPTY)
    else:
        raise _NotVectorised(copy_type)
    if col.null_count:
        encoded = pc.if_else(col.is_valid(), encoded, pa.scalar(_NULL, pa.large_binary()))
    return encoded


def write_encoded(conn: psycopg.Connection[Any], bp: BulkPlan, payload: bytes) -> None:
    """Write a batch encoded by `encode_arrow` (keys unique in the batch) in the current transaction."""
    cur = conn.cursor()
    if bp.create_stage is not None:
        cur.execute(bp.create_stage)
    with cur.copy(bp.copy) as cp:
        cp.write(payload)
    if bp.upsert is not None:
        cur.execute(bp.upsert)


def unique_keys(table: pa.Table, plan: MaterializePlan, bp: BulkPlan) -> bool:
    """Whether no primary key occurs twice in the batch (else generations: the row path)."""
    if not bp.key_at:
        return True
    names = [f"k{j}" for j in range(len(bp.key_at))]
    keys = pa.table([table.column(plan.order[j]) for j in bp.key_at], names=names)
    return keys.group_by(names).aggregate([]).num_rows == table.num_rows
