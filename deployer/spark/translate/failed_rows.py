"""Which rows an expression fails for: the conditions that split them from the rows that go on.

An ExprCompiler records one error condition per operation that can fail (an integer overflow, a
division by zero, a bad CAST), each with its message, in evaluation order: a dead letter's reason is
the first that holds. The rows that go on are those for which none holds (`SparkGraph.split_errors`),
and Spark evaluates that test on every row, before the projection computes the same values again.

A chain of integer `+`, `-`, `*` and unary `-` needs one test, not one per operation: where each
step's other operand is a non-NULL literal (`duration * 10 + 10`), or both operands of the first step
are columns or literals, the chain fails exactly where its columns are all non-NULL and its result is
NULL. Each step is strict (a NULL operand gives NULL) and gives NULL where it overflows (`try_add`
and the like), so a NULL result with non-NULL columns is an overflow somewhere, and an overflow
anywhere is a NULL result; the columns' test keeps a chain that meets a NULL from failing. A step
whose other operand is a column or a chain is left out (`x * y + z` fails where `x * y` overflows
even when `z` is NULL: the reference evaluates left to right), and so is every other expression.
`Errors.failed` gives those conditions; the messages, and which of them a failed row gets, are
unchanged. Only a split by the conditions gains (`SparkGraph._ok`; `cep run`'s spool and driver
split read the messages' column): the bench's stateless plan, ~10 % of its throughput at a million
events a micro-batch (docs/architecture.md, "One condition per chain of integer steps").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column

from deployer.spark.translate.columns import Message
from operators import expr as ir

_INTEGERS = ("integer", "bigint")
_STEPS = ("+", "-", "*")


class Errors(list[tuple[Column, Message]]):
    """An ExprCompiler's error conditions and messages, in evaluation order, and the spans of them
    that one condition stands for when the rows that go on are split from the others (`failed`)."""

    def __init__(self) -> None:
        super().__init__()
        # first index → (end, what makes the one condition)
        self.spans: dict[int, tuple[int, Callable[[], Column]]] = {}

    def cover(self, start: int, condition: Callable[[], Column]) -> None:
        """The conditions from `start` to the end hold together exactly where `condition()` does.
        A chain's span covers those of its own steps, recorded before it: the later, wider wins."""
        self.spans[start] = (len(self), condition)

    def failed(self) -> list[Column]:
        """Conditions of which one holds exactly where one of the list's holds."""
        out: list[Column] = []
        i = 0
        while i < len(self):
            if i in self.spans:
                i, condition = self.spans[i]
                out.append(condition())
            else:
                out.append(self[i][0])
                i += 1
        return out


def failed_conditions(errors: Sequence[tuple[Column, Message]]) -> list[Column]:
    """`errors`' conditions for the split of a node's rows: an ExprCompiler's (`Errors.failed`), or,
    for a list made of several, every one of them."""
    return errors.failed() if isinstance(errors, Errors) else [cond for cond, _ in errors]


def chain_columns(e: ir.Expr) -> list[ir.Col] | None:
    """The columns of `e` when it is a chain of integer steps that fails exactly where they are all
    non-NULL and its result is NULL (the module docstring), else None. A column is such a chain of
    no step, and a non-NULL literal one of no column."""
    if isinstance(e, ir.Col):
        return [e]
    if isinstance(e, ir.Lit):
        return None if e.value is None else []
    if e.type.kind not in _INTEGERS:
        return None
    if isinstance(e, ir.Unary) and e.op == "neg":
        return chain_columns(e.arg)
    if not isinstance(e, ir.Binary) or e.op not in _STEPS:
        return None
    left, right = chain_columns(e.left), chain_columns(e.right)
    if left is None or right is None:
        return None
    operands = (e.left, e.right)
    if all(isinstance(x, (ir.Col, ir.Lit)) for x in operands) or any(isinstance(x, ir.Lit) for x in operands):
        return left + right
    return None
