"""The pattern benchmark's inputs and its hand-written baseline (bench/pattern_workloads measures them).

Events are CDRs made from a counter, `value` (Spark's `rate-micro-batch` source counts it; the
reference executor gets the same tuples from `Feed.events`): each field is one SQL expression over
`value`, which Spark evaluates as it is and Python as the same arithmetic (`div` is integer division,
`IF(c, a, b)` a choice), so both engines see the same events. Keys take turns (`value % keys`), and
`value div keys` is an event's place among its key's events.

The baseline is the 3-step pattern of `script(EQUALITY, ...)` written by hand as a careful user would
with `applyInPandasWithState`: per caller, the partials waiting for e2 in buckets by their receiver
and those waiting for e3 in a list, both in the group state as arrays; an event-time timeout drops
what WITHIN ran out of, and the state of a caller that has nothing left. `nfa` is that automaton in
plain Python, which also counts the matches the reference executor must find.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deployer.spark.translate.graph import SEQ

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EQUALITY = "idreceiver = e1.idreceiver"  # a link the automaton looks up in buckets
RANGE = "duration > e1.duration"  # a link it keeps the waiting partials sorted for (Ranked)


def script(link: str, within: str) -> str:
    """The 3-step pattern: most calls start a partial, the second step is `link` to the first, the
    third a long call (about one in ten)."""
    return (
        "CREATE STREAMSCHEMA cdr WITH idcaller integer, idreceiver integer, duration integer, ts timestamp "
        "TIMESTAMP BY ts;\n"
        "INSERT INTO m SELECT e1.idcaller AS c, e2.idreceiver AS r, e3.duration AS d FROM PATTERN "
        f"EVERY e1=cdr[duration > 10] -> e2=cdr[{link}] -> e3=cdr[duration > 3600] WITHIN {within} "
        "PARTITION BY idcaller;\n"
    )


def _if(cond: bool, a: int, b: int) -> int:
    return a if cond else b


@dataclass(frozen=True)
class Feed:
    """CDR fields as SQL over `value` (see the module docstring); `ts_us`: the event time, µs."""

    idcaller: str
    idreceiver: str
    duration: str
    ts_us: str

    def frame(self, spark: SparkSession, rows_per_batch: int) -> DataFrame:
        """`rows_per_batch` events per micro-batch, with `value` and the project's arrival order."""
        df = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", rows_per_batch)
            .option("numPartitions", 2)
            .load()
        )
        return df.select(
            F.expr(self.idcaller).cast("int").alias("idcaller"),
            F.expr(self.idreceiver).cast("int").alias("idreceiver"),
            F.expr(self.duration).cast("int").alias("duration"),
            F.timestamp_micros(F.expr(self.ts_us)).alias("ts"),
            F.col("value"),
            F.format_string("%020d", F.col("value")).alias(SEQ),
        )

    def events(self, start: int, stop: int) -> list[tuple[int, int, int, datetime]]:
        """The events of `value` in [start, stop), as the reference executor takes them."""
        fs = [
            eval(f"lambda value: {e.replace(' div ', ' // ')}", {"IF": _if})
            for e in (self.idcaller, self.idreceiver, self.duration, self.ts_us)
        ]
        c, r, d, t = fs
        return [(c(v), r(v), d(v), EPOCH + timedelta(microseconds=t(v))) for v in range(start, stop)]


def _hashed(keys: int, salt: int, modulo: int) -> str:
    """A number in 0..modulo-1 that looks random from one of a key's events to the next: the square of
    a linear congruence, modulo a prime (a multiplicative hash alone spreads consecutive events evenly,
    so that a receiver came back too seldom; the square stays under 2^62, a Spark long)."""
    x = f"(((value div {keys}) * {salt} + (value % {keys}) * 7919 + 11) % 2147483647)"
    return f"({x} * {x}) % 2147483647 % {modulo}"


def main_feed(keys: int, step_us: int, receivers: int) -> Feed:
    """Callers in turn; a receiver among `receivers` and a duration in 0..4000 s, both at random."""
    return Feed(
        f"value % {keys}", _hashed(keys, 48271, receivers), _hashed(keys, 69621, 4001), f"value * {step_us}"
    )


def flat_feed(keys: int, partials: int, step_us: int) -> Feed:
    """For EQUALITY: receivers among 100 x `partials`, so that about 1 event in 100 finds a partial
    of its receiver whatever the number waiting."""
    return Feed(
        f"value % {keys}",
        _hashed(keys, 48271, 100 * partials),
        _hashed(keys, 69621, 4001),
        f"value * {step_us}",
    )


def range_feed(keys: int, partials: int, step_us: int) -> Feed:
    """For RANGE: each key's durations fall from 3599 to 100 over 10 x `partials` calls, so no call
    is longer than an earlier one (none is an e2), then two calls of 3700 s: the first is every
    waiting partial's e2, the second their e3. A partial waits until then or its WITHIN. The first
    two such calls are a key's 2 x `partials`-th and the next (its events start 80% down the fall)."""
    period = 10 * partials
    j = f"(((value div {keys}) + {8 * partials}) % {period})"
    return Feed(
        f"value % {keys}",
        _hashed(keys, 48271, 1000),
        f"IF({j} < 2, 3700, 3599 - ({j} * 3500) div {period})",
        f"value * {step_us}",
    )


def quiet_feed(keys: int, busy: int, step_us: int, within_us: int) -> Feed:
    """`main_feed` for the values below `busy`; then the callers go quiet: the events are of 10 other
    callers, short calls that start nothing, from a time past every WITHIN of the first ones."""
    m = main_feed(keys, step_us, 50)
    later = f"{busy * step_us + within_us + 60_000_000} + (value - {busy}) * {step_us}"
    return Feed(
        f"IF(value < {busy}, {m.idcaller}, {keys} + value % 10)",
        m.idreceiver,
        f"IF(value < {busy}, {m.duration}, 5)",
        f"IF(value < {busy}, {m.ts_us}, {later})",
    )


Nfa = Callable[[dict[int, list[int]], list[tuple[int, int]], Any], list[tuple[int, int]]]


def nfa(within_us: int) -> Nfa:
    """The EQUALITY pattern's automaton over one caller's events: `waiting` (receiver -> start times of
    the partials waiting for e2), `bound` (start, receiver of those waiting for e3), both updated;
    returns the matches (r, d). An event is tried against e3, then e2, then starts a partial: one
    event fills one step of a partial at most (defined in a function: Spark's workers pickle it by
    value, they cannot import bench/)."""

    def run(
        waiting: dict[int, list[int]], bound: list[tuple[int, int]], events: Any
    ) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for t, receiver, duration in events:
            if duration > 3600 and bound:
                out += [(r, duration) for start, r in bound if t - start <= within_us]
                bound.clear()
            starts = waiting.pop(receiver, None)
            if starts:
                bound += [(s, receiver) for s in starts if t - s <= within_us]
            if duration > 10:
                waiting.setdefault(receiver, []).append(t)
        return out

    return run


def count_matches(events: list[tuple[int, int, int, datetime]], within_us: int) -> int:
    """The matches `nfa` finds in `events` (EQUALITY), each caller on its own."""
    run = nfa(within_us)
    states: dict[int, tuple[dict[int, list[int]], list[tuple[int, int]]]] = {}
    n = 0
    for c, r, d, ts in events:
        waiting, bound = states.setdefault(c, ({}, []))
        t = (ts - EPOCH) // timedelta(microseconds=1)
        n += len(run(waiting, bound, [(t, r, d)]))
    return n


def hand_pattern(feed: Feed, within_us: int) -> Callable[[SparkSession, int], DataFrame]:
    """The EQUALITY pattern by hand (module docstring) over `feed`'s events."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    per_key = _per_key(within_us)

    def build(spark: SparkSession, rows: int) -> DataFrame:
        df = feed.frame(spark, rows).withWatermark("ts", "0 seconds")
        df = df.select("idcaller", "idreceiver", "duration", "ts", F.unix_micros("ts").alias("t"), "value")
        return df.groupBy("idcaller").applyInPandasWithState(
            per_key,
            "c int, r int, d int",
            # arrays as bytes: PySpark 4.3's workers cannot read a state schema with an array in it
            # (KeyError 'elementType' in StructType.fromJson)
            "waiting_t binary, waiting_r binary, bound_t binary, bound_r binary",
            "append",
            GroupStateTimeout.EventTimeTimeout,
        )

    return build


LAYOUT = ("int64", "int32", "int64", "int32")  # the state's columns: start times (µs) and receivers


def _per_key(within_us: int) -> Callable[[Any, Iterator[Any], Any], Iterator[Any]]:
    run = nfa(within_us)

    def per_key(key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import numpy as np
        import pandas as pd

        waiting: dict[int, list[int]] = {}
        bound: list[tuple[int, int]] = []
        if state.exists:
            wt, wr, bt, br = (
                np.frombuffer(b, dtype=d).tolist() for b, d in zip(state.get, LAYOUT, strict=True)
            )
            for t, r in zip(wt, wr, strict=True):
                waiting.setdefault(r, []).append(t)
            bound = list(zip(bt, br, strict=True))
        out: list[tuple[int, int]] = []
        now = state.getCurrentWatermarkMs() * 1000
        if not state.hasTimedOut:
            parts = list(frames)
            pdf = parts[0] if len(parts) == 1 else pd.concat(parts)
            order = np.argsort(pdf["value"].to_numpy(), kind="stable")  # arrival order
            cols = [pdf[c].to_numpy()[order].tolist() for c in ("t", "idreceiver", "duration")]
            out = run(waiting, bound, zip(*cols, strict=True))
            now = max(now, cols[0][-1])
        # what WITHIN ran out of can match nothing any more: dropped, and the caller with it when empty
        waiting = {r: kept for r, ts in waiting.items() if (kept := [t for t in ts if now - t <= within_us])}
        bound = [b for b in bound if now - b[0] <= within_us]
        starts = [t for ts in waiting.values() for t in ts] + [b[0] for b in bound]
        if not starts:
            state.remove()
        else:
            pairs = [(t, r) for r, ts in waiting.items() for t in ts]
            columns = (
                [p[0] for p in pairs],
                [p[1] for p in pairs],
                [b[0] for b in bound],
                [b[1] for b in bound],
            )
            state.update(tuple(np.array(c, dtype=d).tobytes() for c, d in zip(columns, LAYOUT, strict=True)))
            deadline_ms = (min(starts) + within_us) // 1000 + 1
            state.setTimeoutTimestamp(max(deadline_ms, state.getCurrentWatermarkMs() + 1))
        if not out:
            return  # no DataFrame to build
        yield pd.DataFrame(
            {
                "c": np.full(len(out), key[0], dtype="int32"),
                "r": np.array([o[0] for o in out], dtype="int32"),
                "d": np.array([o[1] for o in out], dtype="int32"),
            }
        )

    return per_key
