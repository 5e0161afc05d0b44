"""Join on Spark: a stream-stream inner join on the band of the two TIME windows, with watermarks."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deployer.spark.translate.columns import col_name
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.graph import SEQ, SparkGraph, order_key, project
from deployer.spark.translate.ties import Mark, on_copy
from operators import expr as ir
from operators import graph as g


def join(sg: SparkGraph, node: g.Join, ties: bool = True) -> None:
    """The join; `ties`: whether it takes an event at its stream's watermark, as the language does
    (deployer.spark.translate.ties), which a checkpoint of the layout before keeps as it was written
    (deployer.spark.run.layout.join_ties)."""
    left = sg.input(node, 0)
    right = sg.input(node, 1)
    right = right.select(
        *[F.col(col_name(i)).alias(col_name(i, 1)) for i in range(len(node.right_schema))],
        F.col(SEQ).alias("__rseq"),
    )
    lname = col_name(node.left_schema.position(node.left_time))
    rname = col_name(node.right_schema.position(node.right_time), 1)
    lt, rt = F.col(lname), F.col(rname)
    # The marked columns, on which Spark finds the band: with `ties`, the event times a microsecond on
    # (deployer.spark.translate.ties); the same band, on which Spark evicts the state as before.
    lw, rw = lt, rt
    marks: dict[int, Mark | None] = {}
    if ties:
        left, lw, marks[0] = on_copy(left, lname, "__lts")
        right, rw, marks[1] = on_copy(right, rname, "__rts")
    sl = F.lit(timedelta(milliseconds=node.left_window.size))
    sr = F.lit(timedelta(milliseconds=node.right_window.size))
    c = ExprCompiler()
    pred = c.compile(node.predicate)
    # The band of the paper's definition (see operators.graph.Join); Spark recognises it as a
    # time-range condition and evicts join state with the watermarks.
    cond = (lw > rw - sl) & (lw < rw + sr)
    keyed = any(_cross_equality(p) for p in ir.conjuncts(node.predicate))
    if not c.errors:
        cond = cond & _keyed_condition(node)
    else:
        # A pair whose predicate fails must still meet, to be dead-lettered as the reference does.
        # That includes pairs whose key equality is NULL (the reference goes on to evaluate the
        # conjuncts after it), so no equality can serve as a join key here.
        failed = F.lit(False)
        for err, _ in c.errors:
            failed = failed | err
        cond = cond & (F.coalesce(pred, F.lit(False)) | failed)
        keyed = False
    if not keyed:
        left, right = _bucketed(node, left, lt, right, rt)
        cond = cond & (F.col("__bucket") == F.col("__rbucket"))
    joined = left.join(right, cond, "inner")
    # Projections are evaluated only for the pairs the predicate keeps.
    c.guard = F.coalesce(pred, F.lit(False))
    # only the output's event time keeps the watermark's mark (see project)
    cols = project(c, node.projections, "_o", timed=node.event_time)
    if marks:
        cols = _remarked(node, cols, marks)
    c.guard = None
    nl, nr = len(node.left_schema), len(node.right_schema)
    pair = [F.col(col_name(i)) for i in range(nl)] + [F.col(col_name(i, 1)) for i in range(nr)]
    checked = bool(c.errors)

    def then(kept: DataFrame) -> DataFrame:
        if checked:
            kept = kept.filter(pred)
        # a pair's place: the left's arrival, then the right's time and arrival (the reference's
        # order of pairs of one left event: its partners in their merged order)
        seq = F.concat(F.col(SEQ), F.lit("|"), order_key(rt), F.lit("|"), F.col("__rseq"))
        kept = kept.select(*cols, seq.alias(SEQ))
        return kept.select(*_outputs(node), SEQ)

    sg.ports[g.Port(node.id)] = sg.split_errors(node, joined, c.errors, pair, then=then)


def _bucketed(
    node: g.Join, left: DataFrame, lt: Column, right: DataFrame, rt: Column
) -> tuple[DataFrame, DataFrame]:
    """The sides with their time buckets (`__bucket`, `__rbucket`), the equality a join with none
    meets on. Spark joins two streams only on an equality: equal time buckets of width Sl + Sr serve.
    A left event falls in one bucket, a right event is copied to the (at most two) buckets its band
    (r.ts - Sl, r.ts + Sr) touches, so every pair in the band meets exactly once."""
    width = (node.left_window.size + node.right_window.size) * 1000
    ls = node.left_window.size * 1000
    rs = node.right_window.size * 1000
    left = left.withColumn("__bucket", F.floor(F.unix_micros(lt) / F.lit(width)))
    r_us = F.unix_micros(rt)
    buckets = F.sequence(
        F.floor((r_us - F.lit(ls)) / F.lit(width)), F.floor((r_us + F.lit(rs)) / F.lit(width))
    )
    return left, right.withColumn("__rbucket", F.explode(buckets))


def _keyed_condition(node: g.Join) -> Column:
    """The WHERE of a join whose conjuncts cannot fail. NULL and FALSE both reject a pair; Spark finds
    the equality conjuncts (a.k = b.k) and uses them as join keys. The other conjuncts are kept from
    folding into a constant: Spark's optimizer would reduce `a.k = b.k AND FALSE` (or a NULL pushed
    down from a later WHERE) to FALSE, losing the equality a stream-stream join needs
    ("Stream-stream join without equality predicate is not supported", found by the fuzzer)."""
    cond = F.lit(True)
    rest: list[Column] = []
    for part in ir.conjuncts(node.predicate):
        if _cross_equality(part):
            cond = cond & ExprCompiler().compile(part)
        else:
            rest.append(ExprCompiler().compile(part))
    if rest:
        residual = rest[0]
        for r in rest[1:]:
            residual = residual & r
        never = (F.col(SEQ) < F.col("__rseq")) & (F.col(SEQ) > F.col("__rseq"))
        cond = cond & (residual | never)
    return cond


def _outputs(node: g.Join) -> list[Column]:
    """The projected columns `_o<i>` named as the output's fields."""
    return [F.col(f"_o{i}").alias(col_name(i)) for i in range(len(node.schema))]


def _cross_equality(e: ir.Expr) -> bool:
    """`left.x = right.y`: a comparison of two plain fields of different sides."""
    return (
        isinstance(e, ir.Binary)
        and e.op == "="
        and isinstance(e.left, ir.Col)
        and isinstance(e.right, ir.Col)
        and e.left.side != e.right.side
    )


def _remarked(node: g.Join, cols: list[Column], marks: dict[int, Mark | None]) -> list[Column]:
    """The projected columns with the output's event time marked again, if it is a side's marked event
    time passed through (as `project` would have kept it)."""
    for i, p in enumerate(node.projections):
        e = p.expr
        if p.name == node.event_time and isinstance(e, ir.Col) and e.type.kind == "timestamp":
            mark = marks.get(e.side)
            if mark is not None:
                cols[i] = cols[i].alias(f"_o{i}", metadata=mark)
    return cols
