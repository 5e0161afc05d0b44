"""The fixed catalogue of scalar functions CPL scripts may call.

A script can only call what is listed here: there is no path from a function name in a script to
an arbitrary engine function (Spark SQL's `reflect`, `java_method`, ...). Each entry states its
arity and how its result type follows from its argument types; both executors implement exactly
these names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from operators.datatypes import (
    DOUBLE,
    T_BIGINT,
    T_DOUBLE,
    T_INTEGER,
    T_STRING,
    T_TIMESTAMP,
    DataType,
    common_type,
    wider_numeric,
)


class FunctionTypeError(Exception):
    """Argument types a function does not accept; the message is shown to the user."""


TypeRule = Callable[[list[DataType]], DataType]


def _numeric(name: str, result: DataType | None = None) -> TypeRule:
    def rule(args: list[DataType]) -> DataType:
        for a in args:
            if not (a.is_numeric or a.is_null):
                raise FunctionTypeError(f"{name}() takes numeric arguments, not {a}")
        if result is not None:
            return result
        return args[0] if not args[0].is_null else T_DOUBLE

    return rule


def _string(name: str, result: DataType) -> TypeRule:
    def rule(args: list[DataType]) -> DataType:
        if not (args[0].is_string or args[0].is_null):
            raise FunctionTypeError(f"{name}() takes a string, not {args[0]}")
        for a in args[1:]:
            if not (a.kind in ("integer", "bigint") or a.is_null):
                raise FunctionTypeError(f"{name}() takes integer positions, not {a}")
        return result

    return rule


def _same(name: str) -> TypeRule:
    def rule(args: list[DataType]) -> DataType:
        t = args[0]
        for a in args[1:]:
            c = common_type(t, a)
            if c is None:
                raise FunctionTypeError(f"{name}() arguments have incompatible types {t} and {a}")
            t = c
        return t

    return rule


def _mod(args: list[DataType]) -> DataType:
    _numeric("mod")(args)
    return wider_numeric(args[0], args[1])


def _concat(args: list[DataType]) -> DataType:
    return T_STRING


def _timestamp_field(name: str) -> TypeRule:
    def rule(args: list[DataType]) -> DataType:
        if args[0].kind not in ("timestamp", "null"):
            raise FunctionTypeError(f"{name}() takes a timestamp, not {args[0]}")
        return T_INTEGER

    return rule


def _epoch_millis(args: list[DataType]) -> DataType:
    if args[0].kind not in ("timestamp", "null"):
        raise FunctionTypeError(f"epoch_millis() takes a timestamp, not {args[0]}")
    return T_BIGINT


def _from_epoch_millis(args: list[DataType]) -> DataType:
    if args[0].kind not in ("integer", "bigint", "null"):
        raise FunctionTypeError(f"from_epoch_millis() takes an integer, not {args[0]}")
    return T_TIMESTAMP


@dataclass(frozen=True)
class Function:
    name: str
    min_args: int
    max_args: int | None  # None: variadic
    result: TypeRule


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in (
        Function("abs", 1, 1, _numeric("abs")),
        Function("round", 1, 2, _numeric("round")),
        Function("floor", 1, 1, _numeric("floor", T_BIGINT)),
        Function("ceil", 1, 1, _numeric("ceil", T_BIGINT)),
        Function("sqrt", 1, 1, _numeric("sqrt", DataType(DOUBLE))),
        Function("power", 2, 2, _numeric("power", DataType(DOUBLE))),
        Function("mod", 2, 2, _mod),
        Function("lower", 1, 1, _string("lower", T_STRING)),
        Function("upper", 1, 1, _string("upper", T_STRING)),
        Function("trim", 1, 1, _string("trim", T_STRING)),
        Function("length", 1, 1, _string("length", T_INTEGER)),
        Function("substring", 2, 3, _string("substring", T_STRING)),
        Function("concat", 1, None, _concat),
        Function("coalesce", 1, None, _same("coalesce")),
        Function("nullif", 2, 2, _same("nullif")),
        Function("greatest", 1, None, _same("greatest")),
        Function("least", 1, None, _same("least")),
        Function("year", 1, 1, _timestamp_field("year")),
        Function("month", 1, 1, _timestamp_field("month")),
        Function("day", 1, 1, _timestamp_field("day")),
        Function("hour", 1, 1, _timestamp_field("hour")),
        Function("minute", 1, 1, _timestamp_field("minute")),
        Function("second", 1, 1, _timestamp_field("second")),
        Function("epoch_millis", 1, 1, _epoch_millis),
        Function("from_epoch_millis", 1, 1, _from_epoch_millis),
    )
}

# Alternative spellings users bring from other SQL dialects.
FUNCTION_ALIASES = {"substr": "substring", "ceiling": "ceil", "pow": "power", "char_length": "length"}


def lookup(name: str) -> Function | None:
    key = name.lower()
    return FUNCTIONS.get(FUNCTION_ALIASES.get(key, key))
