"""Expression IR → PySpark `Column`s (docs/architecture.md, decision 2: never text for Spark to parse).

Columns are named by position (deployer.spark.translate.columns); scalar functions are translated by
deployer.spark.translate.functions.

Some expressions can fail for one event (division by zero, a bad CAST). The reference executor
sends such an event to the dead-letter sink; here each compiled expression also yields error
conditions, which the deployer turns into a per-row error column and routes the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.translate.columns import Message, col_name, msg, quoted, spark_type, text
from deployer.spark.translate.decimal_columns import compare, decimal_arithmetic, exactly_comparable
from deployer.spark.translate.failed_rows import Errors, chain_columns
from deployer.spark.translate.functions import translate_function
from operators import expr as ir
from operators.datatypes import common_type
from operators.values import DECIMAL_TEXT

# ISO 8601 as Python's datetime.fromisoformat reads it (after `Z` → +00:00), in the forms Spark
# parses too: a date, optionally a time to the microsecond, optionally a zone offset.
_ISO_TIMESTAMP = (
    r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"([T ][0-9]{2}(:[0-9]{2}(:[0-9]{2}([.][0-9]{1,6})?)?)?([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)?)?\s*$"
)
_JAVA_BLANKS = r"^[\x00-\x20]+|[\x00-\x20]+$"  # what Java's String.trim removes
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


def _compared_as(exprs: list[ir.Expr]) -> str:
    """How the reference compares these values: as doubles when their common type is double, as
    they are (exactly) when it is a decimal; the kind of their common type."""
    t = exprs[0].type
    for x in exprs[1:]:
        t = common_type(t, x.type) or t
    return t.kind


def _as(c: Column, kind: str) -> Column:
    return c.cast("double") if kind == "double" else c


def _compare(op: str, a: Column, x: ir.Expr, b: Column, y: ir.Expr, kind: str) -> Column:
    """`a op b` of a BETWEEN or IN whose values are compared as `kind` (`_compared_as`)."""
    if kind == "decimal" and exactly_comparable(x.type, y.type):
        return compare(op, a, x.type, b, y.type)
    return {">=": a >= b, "<=": a <= b, "=": a == b}[op]


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
        self.errors = Errors()
        # The condition under which the sub-expression being compiled is evaluated at all.
        self.guard: Column | None = None

    def _error(self, cond: Column, message: Message) -> None:
        self.errors.append((_guarded(cond, self.guard), message))

    def _chain(self, e: ir.Expr, start: int, out: Column) -> None:
        """The error conditions from `start`, those of `e`'s steps, stand for one condition when
        `e` is a chain of integer steps (deployer.spark.translate.failed_rows). The condition is
        built only if a split asks for it: each Column is calls to the JVM, at every deployment's
        start, and a chain's wider span replaces its inner ones."""
        columns = chain_columns(e) if len(self.errors) - start > 1 else None
        if columns is None:
            return
        guard = self.guard

        def condition() -> Column:
            return _guarded(_all([*(self.column(c).isNotNull() for c in columns), out.isNull()]), guard)

        self.errors.cover(start, condition)

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
        start = len(self.errors)
        arg = self.compile(e.arg)
        if e.op == "not":
            return ~arg
        t = spark_type(e.type)
        if e.type.kind in _INT_RANGE:
            out = F.try_subtract(F.lit(0).cast(t), arg.cast(t))
            self._overflow(arg.isNotNull() & out.isNull(), -arg.cast(_WIDE), e.type.kind)
            self._chain(e, start, out)
            return out
        return (-arg).cast(t)

    def _overflow(self, cond: Column, wide: Column, kind: str) -> None:
        self._error(cond, msg("integer overflow: ", wide.cast("string"), f" is out of range for {kind}"))

    def _binary(self, e: ir.Binary) -> Column:
        op = e.op
        start = len(self.errors)
        left = self.compile(e.left)
        if op == "and":  # the right side is only evaluated when the left is not FALSE
            return left & self._under(F.coalesce(left, F.lit(True)), e.right)
        if op == "or":  # ... and when the left is not TRUE
            return left | self._under(F.coalesce(~left, F.lit(True)), e.right)
        # Strict operators: a NULL left operand gives NULL without evaluating the right one.
        right = self._under(left.isNotNull(), e.right)
        if op == "||":
            return F.concat(text(left, e.left.type), text(right, e.right.type))
        if op in ("=", "<>", "<", "<=", ">", ">="):
            if exactly_comparable(e.left.type, e.right.type):
                return compare(op, left, e.left.type, right, e.right.type)
            return {
                "=": left.__eq__,
                "<>": left.__ne__,
                "<": left.__lt__,
                "<=": left.__le__,
                ">": left.__gt__,
                ">=": left.__ge__,
            }[op](right)
        if e.left.type.is_null or e.right.type.is_null:
            return F.lit(None).cast(spark_type(e.type))  # NULL, never an error (operators.analysis)
        if e.type.kind == "decimal":
            return decimal_arithmetic(op, e.left, e.right, left, right, e, self._error)
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
                self._chain(e, start, out)
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
        kind = _compared_as([e.arg, *e.items])
        arg = _as(self.compile(e.arg), kind)
        items = [_as(self._under(arg.isNotNull(), i), kind) for i in e.items]
        if kind == "decimal":
            # Exactly, as the reference compares: Spark's IN would bring every item to one decimal
            # type of at most 38 digits, rounding some. `x IN (a, b)` is `x = a OR x = b` in SQL's
            # three-valued logic.
            tests = [_compare("=", arg, e.arg, item, x, kind) for item, x in zip(items, e.items, strict=True)]
            result = tests[0]
            for test in tests[1:]:
                result = result | test
        else:
            result = arg.isin(*items)
        return ~result if e.negated else result

    def _between(self, e: ir.Between) -> Column:
        kind = _compared_as([e.arg, e.low, e.high])
        arg = _as(self.compile(e.arg), kind)
        low = _as(self._under(arg.isNotNull(), e.low), kind)
        ge = _compare(">=", arg, e.arg, low, e.low, kind)
        # BETWEEN is `arg >= low AND arg <= high` under three-valued logic: high is not evaluated
        # when the first comparison is FALSE (or when arg is NULL).
        high = _as(self._under(arg.isNotNull() & F.coalesce(ge, F.lit(True)), e.high), kind)
        result = ge & _compare("<=", arg, e.arg, high, e.high, kind)
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
            shown = text(arg, src)
            return shown if dst.length is None else F.substring(shown, 1, dst.length)
        if k == "null" or src.kind == "null":
            return F.lit(None).cast(spark_type(dst))
        t = spark_type(dst)
        cast = arg.try_cast(t)  # NULL where the value does not convert (ANSI rules, no wrap-around)
        failed = arg.isNotNull() & cast.isNull()
        shown = quoted(arg) if src.is_string else text(arg, src)
        if k in _INT_RANGE and src.kind in ("integer", "bigint", "decimal", "double"):
            if src.kind == "double" and k == "bigint":
                # Spark lets 2^63 through as the largest bigint (its bound, as a double, is 2^63)
                cast = F.when(arg < F.lit(2.0**63), cast)
                failed = arg.isNotNull() & cast.isNull()
            finite = (
                ~F.isnan(arg) & (F.abs(arg) != F.lit(float("inf"))) if src.kind == "double" else F.lit(True)
            )
            self._error(failed & finite, msg("cannot cast ", shown, f" to {dst}: out of range"))
            self._error(failed, msg("cannot cast ", shown, f" to {dst}"))
        elif k in _INT_RANGE and src.is_string:
            digits = arg.rlike(r"^\s*[+-]?[0-9]+\s*$")
            self._error(failed & digits, msg("cannot cast ", F.trim(arg), f" to {dst}: out of range"))
            self._error(failed, msg("cannot cast ", shown, f" to {dst}"))
        elif k == "decimal":
            # A value that is a number but does not fit decimal(p, s) is out of range; text is a
            # number in the forms the reference reads (operators.values.DECIMAL_TEXT), trimmed as
            # Java trims (Spark alone would take e.g. other scripts' digits).
            if src.is_string:
                value = F.regexp_replace(arg, _JAVA_BLANKS, "")
                numeric = value.rlike(f"^{DECIMAL_TEXT.pattern}$")
                cast = F.when(numeric, value.try_cast(t))
                failed = arg.isNotNull() & cast.isNull()
            else:
                value = shown  # the text of a number
                if src.kind == "double":  # its shortest digits, as the reference's Decimal(repr(x))
                    cast = value.try_cast(t)
                    failed = arg.isNotNull() & cast.isNull()
                numeric = (
                    ~F.isnan(arg) & (F.abs(arg) != F.lit(float("inf")))
                    if src.kind == "double"
                    else F.lit(True)
                )
            self._error(failed & numeric, msg(value, f" is out of range for {dst}"))
            self._error(failed, msg("cannot cast ", shown, f" to {dst}"))
        elif k == "timestamp" and src.is_string:
            # Only the ISO 8601 forms the reference accepts (Spark alone would take '2026' or
            # '99999' as a year).
            cast = F.when(arg.rlike(_ISO_TIMESTAMP), cast)
            failed = arg.isNotNull() & cast.isNull()
            self._error(failed, msg("cannot cast ", shown, f" to {dst}"))
        else:
            self._error(failed, msg("cannot cast ", shown, f" to {dst}"))
        return cast

    # ---- functions: the reference executor's `deployer.evaluation.functions` --------------------------

    def _func(self, e: ir.Func) -> Column:
        if e.name.lower() != "coalesce":
            return translate_function(e, [self.compile(a) for a in e.args], self._error)
        # coalesce(a, b, ...) is CASE WHEN a IS NOT NULL THEN a WHEN b ...: an argument is evaluated
        # only while the ones before it are NULL, so only then can it fail (found by the fuzzer:
        # `coalesce(mod(k, 10), mod(k, k))` dead-lettered k = 0 on Spark alone).
        args: list[Column] = []
        for a in e.args:
            before = [x.isNull() for x in args]
            args.append(self._under(_all(before), a) if before else self.compile(a))
        return translate_function(e, args, self._error)


def _guarded(cond: Column, guard: Column | None) -> Column:
    """`cond` as an error condition: never NULL, and only where `guard` (ExprCompiler.guard) holds."""
    cond = F.coalesce(cond, F.lit(False))
    return cond if guard is None else cond & F.coalesce(guard, F.lit(False))


def _all(conds: list[Column]) -> Column:
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out
