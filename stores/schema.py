"""CPL table declarations as SQLAlchemy tables, and the check against a table that already exists.

Names: CPL identifiers are case-insensitive, and so are unquoted SQL identifiers, so a plain name
(letters, digits, underscore) is stored lower-case: `CREATE TABLE Daily_Bill (IdCaller ...)` becomes
the table `daily_bill` with the column `idcaller`, which the user's SQL can then name in any case
without quotes. Any other name (it must have been double-quoted in CPL) is kept exactly.

An existing table is never altered: when its columns (names and types) or its primary key differ
from the declaration, materialization is refused with both definitions in the message.

A decimal(p, s) column is numeric(p, s) on PostgreSQL; on SQLite it is declared DECIMAL_TEXT(p, s),
which SQLite gives TEXT affinity: the value's exact text is kept (stores/values.py writes it with
its scale), where NUMERIC(p, s) would keep a binary double. (SQL that compares such a column as a
number must CAST it.) A SQLite NUMERIC column is therefore not a decimal column of ours, and a table
that has one is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from operators.datatypes import BIGINT, BOOLEAN, CHAR, DECIMAL, DOUBLE, INTEGER, TIMESTAMP, VARCHAR, DataType
from operators.graph import Table
from stores.errors import StoreSchemaError

UPSERT_FILLFACTOR = 70
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def stored_name(name: str) -> str:
    return name.lower() if _PLAIN.match(name) else name


def sa_type(t: DataType) -> sa.types.TypeEngine[Any]:
    if t.kind == BOOLEAN:
        return sa.Boolean()
    if t.kind == INTEGER:
        return sa.Integer()
    if t.kind == BIGINT:
        return sa.BigInteger()
    if t.kind == DOUBLE:
        return sa.Double()
    if t.kind == DECIMAL:
        return sa.Numeric(t.precision, t.scale).with_variant(DecimalText(t.precision, t.scale), "sqlite")
    if t.kind in (CHAR, VARCHAR):
        return sa.String(t.length)
    if t.kind == TIMESTAMP:
        return sa.DateTime(timezone=True)
    raise TypeError(f"no SQL column type for CPL type {t}")


def sa_table(table: Table, metadata: sa.MetaData | None = None) -> sa.Table:
    pk = {stored_name(k) for k in table.primary_key}
    columns = [
        # autoincrement=False: an integer primary key must stay a plain integer, not SERIAL.
        sa.Column(
            stored_name(f.name), sa_type(f.type), nullable=stored_name(f.name) not in pk, autoincrement=False
        )
        for f in table.columns
    ]
    args: list[Any] = [*columns]
    options: dict[str, Any] = {}
    if table.primary_key:
        args.append(sa.PrimaryKeyConstraint(*(stored_name(k) for k in table.primary_key)))
        # Rows are upserted, i.e. mostly updated in place: free space on every page lets Postgres
        # keep an updated row on its page without a new index entry (a HOT update), which made
        # batched upserts ~2x faster here. Only applies when the table is created by us.
        options["postgresql_with"] = {"fillfactor": UPSERT_FILLFACTOR}
    return sa.Table(stored_name(table.name), metadata or sa.MetaData(), *args, **options)


class DecimalText(sa.types.UserDefinedType[Any]):
    """decimal(p, s) on SQLite: exact text, with TEXT affinity (see the module docstring)."""

    cache_ok = True

    def __init__(self, precision: int | None, scale: int | None) -> None:
        self.precision = precision
        self.scale = scale

    def get_col_spec(self, **kw: Any) -> str:
        return f"DECIMAL_TEXT({self.precision}, {self.scale or 0})"


_DECIMAL_TEXT = re.compile(r"DECIMAL_TEXT\((\d+), ?(\d+)\)\Z", re.IGNORECASE)


def canonical_type(t: sa.types.TypeEngine[Any], dialect: str) -> str:
    """A comparable spelling of a column type, the same for a declared and a reflected column."""
    t = t._variant_mapping.get(dialect, t)
    if isinstance(t, DecimalText):
        return f"decimal({t.precision}, {t.scale or 0})"
    if isinstance(t, sa.Boolean):
        return "boolean"
    if isinstance(t, sa.BigInteger):
        return "bigint"
    if isinstance(t, sa.SmallInteger):
        return "smallint"
    if isinstance(t, sa.Integer):
        return "integer"
    if isinstance(t, sa.Double):
        return "double"
    if isinstance(t, sa.REAL):
        return "real"
    if isinstance(t, sa.Float):
        return "double" if t.precision is None or t.precision > 24 else "real"
    if isinstance(t, sa.Numeric):
        name = "decimal" if t.precision is None else f"decimal({t.precision}, {t.scale or 0})"
        # on SQLite, a NUMERIC column keeps binary doubles: not our exact decimal
        return f"{name} of NUMERIC affinity" if dialect == "sqlite" else name
    if isinstance(t, sa.CHAR):
        return f"char({t.length})" if t.length else "char"
    if isinstance(t, sa.Text):
        return "text"
    if isinstance(t, sa.String):
        return f"varchar({t.length})" if t.length else "varchar"
    if isinstance(t, sa.DateTime):
        # SQLite keeps no time zone in its DATETIME text; stored values are UTC there.
        return "timestamp with time zone" if t.timezone and dialect != "sqlite" else "timestamp"
    return type(t).__name__.lower()


@dataclass(frozen=True)
class Shape:
    columns: tuple[tuple[str, str], ...]  # (name, canonical type), in table order
    primary_key: tuple[str, ...]

    def describe(self) -> str:
        cols = ", ".join(f"{n} {t}" for n, t in self.columns)
        pk = f" PRIMARY KEY ({', '.join(self.primary_key)})" if self.primary_key else ""
        return f"({cols}){pk}"

    def same_as(self, other: Shape) -> bool:
        # Column order and primary-key column order do not change what an upsert does.
        return dict(self.columns) == dict(other.columns) and set(self.primary_key) == set(other.primary_key)


def declared_shape(t: sa.Table, dialect: str) -> Shape:
    return Shape(
        tuple((c.name, canonical_type(c.type, dialect)) for c in t.columns),
        tuple(c.name for c in t.primary_key.columns),
    )


def existing_shape(conn: sa.Connection, name: str) -> Shape | None:
    """The shape of the table `name` in the connection's default schema, or None if there is none."""
    insp = sa.inspect(conn)
    if not insp.has_table(name):
        return None
    dialect = conn.dialect.name
    declared: dict[str, str] = {}
    if dialect == "sqlite":  # a decimal column's declared type, which SQLAlchemy reflects as TEXT
        found = conn.exec_driver_sql("SELECT name, type FROM pragma_table_info(?)", (name,))
        declared = {str(n): str(t) for n, t in found.fetchall()}
    cols = tuple(
        (c["name"], _reflected(c["type"], declared.get(c["name"], ""), dialect))
        for c in insp.get_columns(name)
    )
    pk = tuple(insp.get_pk_constraint(name).get("constrained_columns") or ())
    return Shape(cols, pk)


def _reflected(t: sa.types.TypeEngine[Any], declared: str, dialect: str) -> str:
    m = _DECIMAL_TEXT.match(declared.strip())
    return f"decimal({m.group(1)}, {m.group(2)})" if m else canonical_type(t, dialect)


def schema_mismatch(t: sa.Table, have: Shape, want: Shape, store: str, url: object) -> StoreSchemaError:
    return StoreSchemaError(
        f"table {t.name} already exists with a different definition and is never altered:\n"
        f"  existing: {have.describe()}\n  declared: {want.describe()}\n"
        f"drop or rename the existing table, or change the CREATE TABLE to match it",
        store=store,
        url=str(url),
    )
