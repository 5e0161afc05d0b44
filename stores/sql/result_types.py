"""The CPL type of a result column, from the type its database gives it (docs/language.md, "SQL queries").

PostgreSQL describes each column of a prepared statement by a type OID and a modifier (`pg_column`):

| PostgreSQL | CPL | exact |
|---|---|---|
| int2, int4 | integer | yes |
| int8 | bigint | yes |
| float4, float8 | double | yes |
| numeric(p, s) | decimal(p, s); beyond 38 digits decimal(38, s), s at most 38 | no: NaN |
| numeric (no precision) | decimal(38, 18), Spark's choice for the same type | no: NaN, more digits |
| text, varchar(n), char(n), name, "char" | varchar | yes |
| bool | boolean | yes |
| timestamp, timestamptz, date | timestamp (a date at midnight UTC) | yes |
| anything else (uuid, json, interval, arrays, ...) | varchar: the value as text (operators.results) | yes |

"Exact" columns only ever hold values of their CPL type (psycopg returns an int for an int4, within
its range), so reading them can never dead-letter an event, and the engines skip the per-value work
for them where the values show it (operators.results.convert_column). A value that does not fit one
means that the column's type changed since the script was compiled: both engines stop the run and
say to compile it again (operators.analysis.vouched_results).

SQLite keeps the declared type of a column as written (`PRAGMA table_info` of a view over the query:
`sqlite_column`) and stores values by the affinity that type has, which decides the CPL type; the
type's name refines it where SQLite's affinities are coarser than CPL's types:

| declared type (SQLite's affinity rule, in order) | CPL |
|---|---|
| contains INT (INTEGER affinity) | bigint if it contains BIG or is INT8, else integer |
| contains CHAR, CLOB or TEXT (TEXT affinity) | varchar |
| contains BLOB, or no type at all: an expression (`count(*)`, `x + 1`, a CAST) | varchar |
| contains REAL, FLOA or DOUB (REAL affinity) | double |
| otherwise (NUMERIC affinity): BOOL... | boolean |
| DATE..., TIME..., ...TIMESTAMP | timestamp |
| DECIMAL..., NUMERIC... | decimal(p, s) as for PostgreSQL; without (p, s) decimal(38, 18) |
| any other name (STRING, JSON, UUID...) | varchar: the value as text, as for PostgreSQL's other types |

No SQLite column is exact: a SQLite column holds any value ('abc' in an INTEGER column), and a value
that does not fit dead-letters its event.
"""

from __future__ import annotations

import re

from operators.datatypes import T_BIGINT, T_BOOLEAN, T_DOUBLE, T_INTEGER, T_STRING, T_TIMESTAMP, DataType
from operators.declarations import ResultColumn

MAX_PRECISION = 38
UNCONSTRAINED = DataType("decimal", precision=MAX_PRECISION, scale=18)

# PostgreSQL's type OIDs (pg_type.oid, fixed for built-in types) → (name, CPL type).
PG_TYPES: dict[int, tuple[str, DataType]] = {
    21: ("int2", T_INTEGER),
    23: ("int4", T_INTEGER),
    20: ("int8", T_BIGINT),
    700: ("float4", T_DOUBLE),
    701: ("float8", T_DOUBLE),
    25: ("text", T_STRING),
    1043: ("varchar", T_STRING),
    1042: ("bpchar", T_STRING),
    19: ("name", T_STRING),
    18: ("char", T_STRING),
    16: ("bool", T_BOOLEAN),
    1114: ("timestamp", T_TIMESTAMP),
    1184: ("timestamptz", T_TIMESTAMP),
    1082: ("date", T_TIMESTAMP),
}
PG_NUMERIC = 1700
_VARHDRSZ = 4  # a numeric's type modifier is ((precision << 16) | scale) + 4


def decimal_type(precision: int, scale: int) -> DataType:
    """decimal(p, s) for a database's numeric(p, s): a negative scale (PostgreSQL 15) adds integer
    digits, a scale above the precision adds leading fraction digits; at most 38 digits in all."""
    digits = max(precision - scale, 0) + max(scale, 0)
    s = min(max(scale, 0), MAX_PRECISION)
    return DataType("decimal", precision=max(min(digits, MAX_PRECISION), s, 1), scale=s)


def pg_column(name: str, oid: int, typmod: int) -> ResultColumn:
    """The CPL column of a PostgreSQL result column of type `oid` with modifier `typmod`."""
    if oid == PG_NUMERIC:
        if typmod < _VARHDRSZ:
            return ResultColumn(name, UNCONSTRAINED, "numeric")
        t = typmod - _VARHDRSZ
        precision = (t >> 16) & 0xFFFF
        scale = ((t & 0x7FF) ^ 0x400) - 0x400  # 11 bits, signed since PostgreSQL 15
        return ResultColumn(name, decimal_type(precision, scale), f"numeric({precision},{scale})")
    known = PG_TYPES.get(oid)
    if known is None:
        return ResultColumn(name, T_STRING, f"oid {oid}", exact=True)
    source, cpl_type = known
    return ResultColumn(name, cpl_type, source, exact=True)


_PRECISION = re.compile(r"\(\s*(-?\d+)\s*(?:,\s*(-?\d+)\s*)?\)")


def sqlite_type(declared: str) -> DataType:
    """The CPL type of a SQLite column declared `declared` ("" for none), by SQLite's affinity rules."""
    name = declared.upper()
    if "INT" in name:
        return T_BIGINT if "BIG" in name or name.strip() == "INT8" else T_INTEGER
    if any(k in name for k in ("CHAR", "CLOB", "TEXT")) or "BLOB" in name or not name.strip():
        return T_STRING
    if any(k in name for k in ("REAL", "FLOA", "DOUB")):
        return T_DOUBLE
    if name.startswith("BOOL"):
        return T_BOOLEAN
    if name.startswith(("DATE", "TIME")) or name.endswith("TIMESTAMP"):
        return T_TIMESTAMP
    if name.startswith(("DECIMAL", "NUMERIC")):
        m = _PRECISION.search(name)
        return UNCONSTRAINED if m is None else decimal_type(int(m.group(1)), int(m.group(2) or 0))
    return T_STRING


def sqlite_column(name: str, declared: str) -> ResultColumn:
    return ResultColumn(name, sqlite_type(declared), declared)
