"""CPL data types and stream schemas.

Types are immutable values so that graph nodes can derive and compare schemas freely. The set is
the paper's (CPL.md section 1): boolean, integer, bigint, double, decimal(p, s), char(n),
varchar(n) and timestamp.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

# Kinds, ordered for numeric widening: a binary arithmetic operator's result is the wider kind.
BOOLEAN = "boolean"
INTEGER = "integer"
BIGINT = "bigint"
DECIMAL = "decimal"
DOUBLE = "double"
CHAR = "char"
VARCHAR = "varchar"
TIMESTAMP = "timestamp"
NULL = "null"  # the type of a bare NULL literal; unifies with anything

NUMERIC_KINDS = (INTEGER, BIGINT, DECIMAL, DOUBLE)
STRING_KINDS = (CHAR, VARCHAR)


@dataclass(frozen=True)
class DataType:
    kind: str
    length: int | None = None  # char(n) / varchar(n)
    precision: int | None = None  # decimal(p, s)
    scale: int | None = None

    def __str__(self) -> str:
        if self.kind in STRING_KINDS and self.length is not None:
            return f"{self.kind}({self.length})"
        if self.kind == DECIMAL and self.precision is not None:
            return f"decimal({self.precision}, {self.scale or 0})"
        return self.kind

    @property
    def is_numeric(self) -> bool:
        return self.kind in NUMERIC_KINDS

    @property
    def is_string(self) -> bool:
        return self.kind in STRING_KINDS

    @property
    def is_null(self) -> bool:
        return self.kind == NULL


T_BOOLEAN = DataType(BOOLEAN)
T_INTEGER = DataType(INTEGER)
T_BIGINT = DataType(BIGINT)
T_DOUBLE = DataType(DOUBLE)
T_STRING = DataType(VARCHAR)
T_TIMESTAMP = DataType(TIMESTAMP)
T_NULL = DataType(NULL)

# Spellings accepted in CPL for each kind (CPL.md section 1).
TYPE_ALIASES: dict[str, str] = {
    "boolean": BOOLEAN,
    "bool": BOOLEAN,
    "integer": INTEGER,
    "int": INTEGER,
    "bigint": BIGINT,
    "long": BIGINT,
    "double": DOUBLE,
    "float": DOUBLE,
    "decimal": DECIMAL,
    "numeric": DECIMAL,
    "char": CHAR,
    "varchar": VARCHAR,
    "string": VARCHAR,
    "text": VARCHAR,
    "timestamp": TIMESTAMP,
}


def numeric_rank(t: DataType) -> int:
    return NUMERIC_KINDS.index(t.kind)


def wider_numeric(a: DataType, b: DataType) -> DataType:
    """The type two numbers are brought to when one value may be either (CASE, coalesce, greatest,
    ...): the wider kind; for decimals one that holds the integer digits of both and as many places
    as either has, as far as 38 digits allow (an integer counts as decimal(10, 0), a bigint as
    decimal(20, 0)). Arithmetic has its own result types (operators.decimals)."""
    if a.is_null:
        return b
    if b.is_null:
        return a
    wide = a if numeric_rank(a) >= numeric_rank(b) else b
    if wide.kind == DECIMAL:
        integer = max(_integer_digits(a), _integer_digits(b))
        scale = min(max(a.scale or 0, b.scale or 0), 38 - integer)
        return DataType(DECIMAL, precision=min(integer + scale, 38), scale=scale)
    return DataType(wide.kind)


def _integer_digits(t: DataType) -> int:
    if t.kind == DECIMAL:
        return (t.precision or 38) - (t.scale or 0)
    return 10 if t.kind == INTEGER else 20


def common_type(a: DataType, b: DataType) -> DataType | None:
    """The type both values can be compared or unioned as, or None when they cannot."""
    if a.is_null:
        return b
    if b.is_null:
        return a
    if a.is_numeric and b.is_numeric:
        return wider_numeric(a, b)
    if a.is_string and b.is_string:
        return T_STRING
    if a.kind == b.kind:
        return DataType(a.kind)
    return None


@dataclass(frozen=True)
class Field:
    name: str
    type: DataType
    nullable: bool = True

    def __str__(self) -> str:
        return f"{self.name} {self.type}"


@dataclass(frozen=True)
class Schema:
    """An ordered list of uniquely named fields. Field names compare case-insensitively, as in SQL."""

    fields: tuple[Field, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for i, f in enumerate(self.fields):
            key = f.name.lower()
            if key in index:
                raise ValueError(f"duplicate field name {f.name!r}")
            index[key] = i
        object.__setattr__(self, "_index", index)

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index

    def get(self, name: str) -> Field | None:
        i = self._index.get(name.lower())
        return None if i is None else self.fields[i]

    def position(self, name: str) -> int:
        return self._index[name.lower()]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def __str__(self) -> str:
        return "(" + ", ".join(str(f) for f in self.fields) + ")"

    def same_shape(self, other: Schema) -> bool:
        """Union needs identical schemas up to name case and string lengths (a decimal's precision
        and scale included: its values are written with its scale)."""
        if len(self) != len(other):
            return False
        for a, b in zip(self.fields, other.fields, strict=True):
            if a.name.lower() != b.name.lower():
                return False
            if common_type(a.type, b.type) is None or (
                a.type.kind != b.type.kind and not (a.type.is_string and b.type.is_string)
            ):
                return False
            if a.type.kind == DECIMAL and a.type != b.type:
                return False
        return True


def schema_of(*fields: tuple[str, DataType]) -> Schema:
    return Schema(tuple(Field(n, t) for n, t in fields))
