"""Expression IR → PySpark `Column`s (DESIGN.md decision 2: never text for Spark to parse).

Inside a translated graph every DataFrame names its columns by position (`_0`, `_1`, ...; a join's
right side `_r0`, ...), so user field names, whatever characters they hold, are never resolved by
Spark's parser; real names are applied only when results leave the engine.

Some expressions can fail for one event (division by zero, a bad CAST). The reference executor
sends such an event to the dead-letter sink; here each compiled expression also yields error
conditions, which the deployer turns into a per-row error column and routes the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from operators import expr as ir
from operators.types import DataType, Schema


def spark_type(t: DataType) -> T.DataType:
    k = t.kind
    if k == "boolean":
        return T.BooleanType()
    if k == "integer":
        return T.IntegerType()
    if k == "bigint":
        return T.LongType()
    if k == "double":
        return T.DoubleType()
    if k == "decimal":
        return T.DecimalType(t.precision or 38, t.scale or 0)
    if k == "timestamp":
        return T.TimestampType()
    if k == "null":
        return T.StringType()
    return T.StringType()


def struct_of(schema: Schema, prefix: str = "_") -> T.StructType:
    return T.StructType(
        [T.StructField(f"{prefix}{i}", spark_type(f.type), True) for i, f in enumerate(schema)]
    )


def col_name(index: int, side: int = 0) -> str:
    return f"_{index}" if side == 0 else f"_r{index}"


Message = Column | str  # an error message: fixed text, or text built from the failing values


def _text(c: Column, t: DataType | None = None) -> Column:
    """The varchar form of a value of type `t`, as the reference executor's `to_text` gives it:
    booleans as true/false, timestamps as `yyyy-MM-dd HH:mm:ss[.ffffff]` (trailing zeros cut),
    decimals in plain notation, doubles as Python prints them (`repr`)."""
    if t is not None and t.kind == "double":
        return _double_text(c)
    return c.cast("string")


def _double_text(c: Column) -> Column:
    """Python's repr of a double. Spark prints doubles as Java does (`1.0E7`, `1.5E-5`); Python
    prints `10000000.0` and `1.5e-05`: fixed notation for 1e-4 <= |x| < 1e16, else `d.ddde+XX`.
    Both print the shortest digits that read back as the same double (Java 17 in all but rare
    cases), so only the notation is rewritten."""
    java = c.cast("string")
    a = F.abs(c)
    # Spark's double → decimal goes through Java's text, so these are exactly the printed digits.
    plain = F.regexp_replace(c.cast(T.DecimalType(38, 22)).cast("string"), "0+$", "")
    plain = F.when(plain.endswith("."), F.concat(plain, F.lit("0"))).otherwise(plain)
    mantissa = F.regexp_replace(F.regexp_extract(java, "^(-?[0-9.]+)E", 1), "[.]0$", "")
    exponent = F.format_string("%+03d", F.regexp_extract(java, "E(-?[0-9]+)$", 1).cast("int"))
    return (
        F.when(F.isnan(c), F.lit("nan"))
        .when(c == F.lit(float("inf")), F.lit("inf"))
        .when(c == F.lit(float("-inf")), F.lit("-inf"))
        .when(c == F.lit(0.0), java)
        .when((a >= F.lit(1e-4)) & (a < F.lit(1e16)), plain)
        .otherwise(F.concat(mantissa, F.lit("e"), exponent))
    )


def _msg(*parts: Column | str) -> Column:
    return F.concat(*[F.lit(p) if isinstance(p, str) else p for p in parts])


def _quoted(c: Column) -> Column:
    """Python's repr of a plain string, which the reference executor's CAST messages use."""
    return _msg("'", c, "'")


# ISO 8601 as Python's datetime.fromisoformat reads it (after `Z` → +00:00), in the forms Spark
# parses too: a date, optionally a time to the microsecond, optionally a zone offset.
_ISO_TIMESTAMP = (
    r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"([T ][0-9]{2}(:[0-9]{2}(:[0-9]{2}([.][0-9]{1,6})?)?)?([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)?)?\s*$"
)
_INT_RANGE = {"integer": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}
_WIDE = T.DecimalType(38, 0)


def like_pattern(pattern: str) -> str:
    """A CPL LIKE pattern in Spark's syntax. Both treat `%` and `_` alike and escape with a
    backslash, but in CPL a backslash before any other character (or at the end) just makes that
    character literal, where Spark rejects the pattern."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 < len(pattern):
                nxt = pattern[i + 1]
                out.append("\\" + nxt if nxt in "%_\\" else nxt)
                i += 2
                continue
            out.append("\\\\")  # a trailing backslash is a literal backslash
        else:
            out.append(c)
        i += 1
    return "".join(out)


class ExprCompiler:
    """Compiles IR trees over one input (or a join's two) into Columns, collecting error conditions.

    The result must be NULL exactly where the reference executor's value is NULL, and an error must
    be recorded exactly where its evaluation raises: the reference evaluates strict operators
    (arithmetic, comparisons, `||`) left to right and skips the right operand when the left one is
    NULL, short-circuits AND/OR, and evaluates only the CASE branch it takes; `_under` reproduces
    that by guarding the error conditions of the sub-expressions that would not be evaluated.
    """

    def __init__(self, column: Callable[[ir.Col], Column] | None = None):
        self.column = column or (lambda c: F.col(col_name(c.index, c.side)))
        self.errors: list[tuple[Column, Message]] = []
        # The condition under which the sub-expression being compiled is evaluated at all.
        self.guard: Column | None = None

    def _error(self, cond: Column, message: Message) -> None:
        cond = F.coalesce(cond, F.lit(False))
        if self.guard is not None:
            cond = cond & F.coalesce(self.guard, F.lit(False))
        self.errors.append((cond, message))

    def _under(self, extra: Column, e: ir.Expr) -> Column:
        saved = self.guard
        self.guard = extra if saved is None else (saved & extra)
        try:
            return self.compile(e)
        finally:
            self.guard = saved

    def compile(self, e: ir.Expr) -> Column:
        method = getattr(self, "_" + type(e).__name__.lower())
        out: Column = method(e)
        return out

    def _lit(self, e: ir.Lit) -> Column:
        return F.lit(e.value).cast(spark_type(e.type))

    def _col(self, e: ir.Col) -> Column:
        return self.column(e)

    def _unary(self, e: ir.Unary) -> Column:
        arg = self.compile(e.arg)
        if e.op == "not":
            return ~arg
        t = spark_type(e.type)
        if e.type.kind in _INT_RANGE:
            out = F.try_subtract(F.lit(0).cast(t), arg.cast(t))
            self._overflow(arg.isNotNull() & out.isNull(), -arg.cast(_WIDE), e.type.kind)
            return out
        return (-arg).cast(t)

    def _overflow(self, cond: Column, wide: Column, kind: str) -> None:
        self._error(cond, _msg("integer overflow: ", wide.cast("string"), f" is out of range for {kind}"))

    def _binary(self, e: ir.Binary) -> Column:
        op = e.op
        left = self.compile(e.left)
        if op == "and":  # the right side is only evaluated when the left is not FALSE
            return left & self._under(F.coalesce(left, F.lit(True)), e.right)
        if op == "or":  # ... and when the left is not TRUE
            return left | self._under(F.coalesce(~left, F.lit(True)), e.right)
        # Strict operators: a NULL left operand gives NULL without evaluating the right one.
        right = self._under(left.isNotNull(), e.right)
        if op == "||":
            return F.concat(_text(left, e.left.type), _text(right, e.right.type))
        if op in ("=", "<>", "<", "<=", ">", ">="):
            return {
                "=": left.__eq__,
                "<>": left.__ne__,
                "<": left.__lt__,
                "<=": left.__le__,
                ">": left.__gt__,
                ">=": left.__ge__,
            }[op](right)
        t = spark_type(e.type)
        lc, rc = left.cast(t), right.cast(t)
        if op in ("+", "-", "*"):
            if e.type.kind in _INT_RANGE:
                # The reference raises on overflow; Spark (non-ANSI) would wrap around silently.
                fn = {"+": F.try_add, "-": F.try_subtract, "*": F.try_multiply}[op]
                out = fn(lc, rc)
                lw, rw = left.cast(_WIDE), right.cast(_WIDE)
                wide = (lw + rw) if op == "+" else (lw - rw) if op == "-" else (lw * rw)
                self._overflow(left.isNotNull() & right.isNotNull() & out.isNull(), wide, e.type.kind)
                return out
            return (lc + rc) if op == "+" else (lc - rc) if op == "-" else (lc * rc)
        assert op in ("/", "%"), op
        zero = left.isNotNull() & (right == F.lit(0))
        self._error(zero, "division by zero")
        safe = F.when(zero, F.lit(None)).otherwise(rc)
        # SQL's % takes the sign of the dividend, as Spark's % (and Java's) does.
        return ((lc / safe) if op == "/" else (lc % safe)).cast(t)

    def _isnull(self, e: ir.IsNull) -> Column:
        arg = self.compile(e.arg)
        return arg.isNotNull() if e.negated else arg.isNull()

    def _inlist(self, e: ir.InList) -> Column:
        arg = self.compile(e.arg)
        result = arg.isin(*[self._under(arg.isNotNull(), i) for i in e.items])
        return ~result if e.negated else result

    def _between(self, e: ir.Between) -> Column:
        arg = self.compile(e.arg)
        low = self._under(arg.isNotNull(), e.low)
        ge = arg >= low
        # BETWEEN is `arg >= low AND arg <= high` under three-valued logic: high is not evaluated
        # when the first comparison is FALSE (or when arg is NULL).
        high = self._under(arg.isNotNull() & F.coalesce(ge, F.lit(True)), e.high)
        result = ge & (arg <= high)
        return ~result if e.negated else result

    def _like(self, e: ir.Like) -> Column:
        arg = self.compile(e.arg)
        if isinstance(e.pattern, ir.Lit):
            if e.pattern.value is None:
                return F.lit(None).cast(T.BooleanType())
            result = arg.like(like_pattern(str(e.pattern.value)))
        else:
            pattern = self._under(arg.isNotNull(), e.pattern)
            result = F.like(arg, pattern)
        return ~result if e.negated else result

    def _case(self, e: ir.Case) -> Column:
        t = spark_type(e.type)
        out: Column | None = None
        not_yet: Column = F.lit(True)  # no earlier WHEN held
        for cond, value in e.whens:
            c = self._under(not_yet, cond)
            taken = F.coalesce(c, F.lit(False))
            v = self._under(not_yet & taken, value).cast(t)
            out = F.when(taken, v) if out is None else out.when(taken, v)
            not_yet = not_yet & ~taken
        assert out is not None
        if e.else_ is not None:
            out = out.otherwise(self._under(not_yet, e.else_).cast(t))
        return out

    # ---- CAST: the reference executor's `operators.values.cast_value`, failures included --------

    def _cast(self, e: ir.Cast) -> Column:
        arg = self.compile(e.arg)
        src, dst = e.arg.type, e.type
        k = dst.kind
        if src.kind == k and k not in ("decimal", "char", "varchar"):
            return arg
        if k in ("char", "varchar"):
            text = _text(arg, src)
            return text if dst.length is None else F.substring(text, 1, dst.length)
        if k == "null" or src.kind == "null":
            return F.lit(None).cast(spark_type(dst))
        t = spark_type(dst)
        cast = arg.try_cast(t)  # NULL where the value does not convert (ANSI rules, no wrap-around)
        failed = arg.isNotNull() & cast.isNull()
        shown = _quoted(arg) if src.is_string else _text(arg, src)
        if k in _INT_RANGE and src.kind in ("integer", "bigint", "decimal", "double"):
            finite = (
                ~F.isnan(arg) & (F.abs(arg) != F.lit(float("inf"))) if src.kind == "double" else F.lit(True)
            )
            self._error(failed & finite, _msg("cannot cast ", shown, f" to {dst}: out of range"))
            self._error(failed, _msg("cannot cast ", shown, f" to {dst}"))
        elif k in _INT_RANGE and src.is_string:
            digits = arg.rlike(r"^\s*[+-]?[0-9]+\s*$")
            self._error(failed & digits, _msg("cannot cast ", F.trim(arg), f" to {dst}: out of range"))
            self._error(failed, _msg("cannot cast ", shown, f" to {dst}"))
        elif k == "decimal":
            # A value that is a number but does not fit decimal(p, s) is out of range.
            wide = arg.try_cast(T.DecimalType(38, dst.scale or 0)) if src.kind != "double" else arg
            numeric = wide.isNotNull()
            if src.kind == "double":
                numeric = numeric & ~F.isnan(arg) & (F.abs(arg) != F.lit(float("inf")))
            self._error(failed & numeric, _msg(F.trim(_text(arg, src)), f" is out of range for {dst}"))
            self._error(failed, _msg("cannot cast ", shown, f" to {dst}"))
        elif k == "timestamp" and src.is_string:
            # Only the ISO 8601 forms the reference accepts (Spark alone would take '2026' or
            # '99999' as a year).
            cast = F.when(arg.rlike(_ISO_TIMESTAMP), cast)
            failed = arg.isNotNull() & cast.isNull()
            self._error(failed, _msg("cannot cast ", shown, f" to {dst}"))
        else:
            self._error(failed, _msg("cannot cast ", shown, f" to {dst}"))
        return cast

    # ---- functions: the reference executor's `deployer.local.builtins` ------------------------------

    def _func(self, e: ir.Func) -> Column:
        args = [self.compile(a) for a in e.args]
        t = spark_type(e.type)
        name = e.name.lower()
        name = {"substr": "substring", "ceiling": "ceil", "pow": "power", "char_length": "length"}.get(
            name, name
        )
        all_set = F.lit(True)
        for a in args:
            all_set = all_set & a.isNotNull()
        simple: dict[str, Callable[..., Column]] = {
            "abs": F.abs,
            "lower": F.lower,
            "upper": F.upper,
            "trim": F.trim,
            "length": F.length,
            "year": F.year,
            "month": F.month,
            "day": F.dayofmonth,
            "hour": F.hour,
            "minute": F.minute,
            "second": F.second,
        }
        if name in simple:
            return simple[name](*args).cast(t)
        if name in ("coalesce", "greatest", "least"):
            # Arguments are widened to the result type first; greatest/least skip NULLs.
            fn = {"coalesce": F.coalesce, "greatest": F.greatest, "least": F.least}[name]
            typed = [a.cast(t) for a in args]
            return (fn(*typed) if len(typed) > 1 else typed[0]).cast(t)
        if name == "nullif":
            a, b = (x.cast(t) for x in args)
            return F.when(a.isNotNull() & b.isNotNull() & (a == b), F.lit(None).cast(t)).otherwise(a)
        if name in ("floor", "ceil"):
            x = args[0]
            if e.args[0].type.kind in ("integer", "bigint"):
                return x.cast(t)
            if e.args[0].type.kind == "double":
                self._error(
                    F.isnan(x) | (F.abs(x) == F.lit(float("inf"))),
                    _msg("cannot convert ", _text(x, e.args[0].type), " to bigint"),
                )
            return (F.floor(x) if name == "floor" else F.ceil(x)).cast(t)
        if name == "round":
            digits: Any = 0 if len(args) == 1 else _int_lit(e.args[1])
            return F.round(args[0], digits).cast(t)
        if name == "sqrt":
            self._error(
                args[0] < F.lit(0),
                _msg(
                    "cannot take the square root of a negative number (", _text(args[0], e.args[0].type), ")"
                ),
            )
            return F.sqrt(args[0]).cast(t)
        if name == "power":
            a, b = (x.cast("double") for x in args)
            out = F.pow(a, b)
            finite = F.lit(True)
            for x in (a, b):
                finite = finite & ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))
            bad = all_set & finite & (F.isnan(out) | (F.abs(out) == F.lit(float("inf"))))
            self._error(
                bad,
                _msg(
                    "power(",
                    _text(args[0], e.args[0].type),
                    ", ",
                    _text(args[1], e.args[1].type),
                    ") is out of range or undefined",
                ),
            )
            return out
        if name == "mod":
            a, b = (x.cast(t) for x in args)
            zero = all_set & (b == F.lit(0))
            self._error(zero, "division by zero")
            return (a % F.when(zero, F.lit(None)).otherwise(b)).cast(t)
        if name == "substring":
            # SQL positions count from 1 and [start, start + length) is cut to the string, so
            # substring('hello', 0, 3) = 'he' as in PostgreSQL (Spark would count from the end).
            s, start = args[0], args[1]
            lo = F.greatest(start, F.lit(1))
            if len(args) > 2:
                length = args[2]
                self._error(all_set & (length < F.lit(0)), "negative substring length not allowed")
                count = F.greatest(start + length - lo, F.lit(0))
            else:
                count = F.lit(2**31 - 1)
            return F.when(all_set, s.substr(lo, count))
        if name == "concat":
            # concat() skips NULLs as PostgreSQL does; `||` is the strict form.
            return F.concat_ws("", *[_text(a, x.type) for a, x in zip(args, e.args, strict=True)])
        if name == "epoch_millis":
            return F.unix_millis(args[0])
        if name == "from_epoch_millis":
            return F.timestamp_millis(args[0])
        raise NotImplementedError(f"function {name} has no Spark translation")


def _int_lit(e: ir.Expr) -> int:
    if isinstance(e, ir.Lit) and isinstance(e.value, int):
        return e.value
    raise ValueError("round() takes a literal number of digits on Spark")


def error_column(errors: list[tuple[Column, Message]]) -> Column | None:
    """One column holding the first error message of a row, NULL when it has none."""
    if not errors:
        return None
    out: Column | None = None
    for cond, message in errors:
        text = F.lit(message) if isinstance(message, str) else message
        out = F.when(cond, text) if out is None else out.when(cond, text)
    assert out is not None
    return out
