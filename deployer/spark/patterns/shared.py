"""The pattern sinks' shared query on Spark (deployer.spark.run.pattern_groups): the patterns of its
sinks run in one stateful operator over one read of their source streams.

Each source stream is read once, and each of its events goes to every input of every pattern that
reads the stream (a row per input, `explode`d from one): a Spark plan is a tree, so an input
translated once per pattern would read the stream and run its Sequencer once per pattern again,
each Sequencer with state of its own. The rows are keyed by (pattern, partition key), the pattern
named by its sink (`PAT`: a name that stays when the script's other statements change, as the key
of state must), and one `transformWithState` runs each key's automaton as the pattern's own
operator would (`SharedPatternProcessor`, over a deployer.spark.patterns.processor.PatternProcessor
per pattern; the state is the same value per key). Its rows carry every pattern's fields, each in
columns of its own (`__p<k>_<i>`), those of the others NULL; `part` makes a micro-batch of them
the rows of one pattern's processor again, which its sink's query would have written.

No copy of the match time goes out with them (`MARK_TIME`, deployer.spark.translate.ties): only Maps
and the sinks follow, and nothing reads Spark's watermark after the patterns.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer import settings
from deployer.spark.patterns.processor import FAIL, FAILED_EVENT, PatternProcessor, SharedPatternProcessor
from deployer.spark.patterns.translate import TAIL, event_micros, event_struct, output_fields, partition_key
from deployer.spark.translate.graph import SEQ, SparkGraph
from operators import graph as g

PAT = "__pat"  # which pattern a row is for: its sink's name, lower-case


def _column(k: int, i: int) -> str:
    return f"__p{k}_{i}"


def _sources(patterns: Sequence[g.Pattern]) -> list[str]:
    """The source nodes the patterns read, each once, in the order the patterns read them."""
    return list(dict.fromkeys(p.node for node in patterns for p in node.inputs))


def _read_once(sg: SparkGraph, patterns: Sequence[g.Pattern], names: Sequence[str]) -> DataFrame:
    """Every event of the patterns' sources, once per pattern input that reads its stream: `PAT`,
    `__inp`, `__key`, `__t`, `SEQ`, and the event in `__s<m>` (m: its source's place)."""
    frames = []
    for m, source in enumerate(_sources(patterns)):
        readers = [
            (k, i) for k, node in enumerate(patterns) for i, p in enumerate(node.inputs) if p.node == source
        ]
        k0, i0 = readers[0]
        one = [
            F.struct(
                F.lit(names[k]).alias(PAT),
                F.lit(i).alias("__inp"),
                partition_key(patterns[k], i).alias("__key"),
                event_micros(patterns[k], i).alias("__t"),
            )
            for k, i in readers
        ]
        rows = sg.port(g.Port(source)).select(
            F.explode(F.array(*one)).alias("__r"),
            F.col(SEQ),
            event_struct(patterns[k0].input_schemas[i0]).alias(f"__s{m}"),
        )
        frames.append(rows.select("__r.*", SEQ, f"__s{m}"))
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def shared_patterns(sg: SparkGraph, patterns: Sequence[g.Pattern], names: Sequence[str]) -> DataFrame:
    """The rows of the shared operator of `patterns`, whose sinks are `names` (lower-case)."""
    sources = _sources(patterns)
    events = [[f"__s{sources.index(p.node)}" for p in node.inputs] for node in patterns]
    fields = [
        T.StructField(_column(k, i), f.dataType)
        for k, node in enumerate(patterns)
        for i, f in enumerate(output_fields(node))
    ]
    out_schema = T.StructType([T.StructField(PAT, T.StringType()), *TAIL, *fields])
    cap, blank = settings.current().pattern_max_partials, dict.fromkeys(out_schema.names)
    tail = [f.name for f in TAIL]
    processor = SharedPatternProcessor(
        {
            name: PatternProcessor(
                node,
                cap,
                [*(_column(k, i) for i in range(len(node.schema))), *tail],
                events[k],
                marked=False,
                blank={**blank, PAT: name},
            )
            for k, (node, name) in enumerate(zip(patterns, names, strict=True))
        }
    )
    return (
        _read_once(sg, patterns, names)
        .groupBy(F.col(PAT), F.col("__key"))
        .transformWithState(
            statefulProcessor=processor,
            outputStructType=out_schema,
            outputMode="Append",
            timeMode="EventTime",
        )
    )


def part(rows: DataFrame, k: int, node: g.Pattern, name: str) -> DataFrame:
    """The rows of the shared operator (or a micro-batch of them) that are pattern `k`'s, `node`
    with sink `name`, as its own processor's: its fields (`_0`, ...), `SEQ`, `FAIL`, `FAILED_EVENT`."""
    own = [F.col(_column(k, i)).alias(f.name) for i, f in enumerate(output_fields(node))]
    return rows.where(F.col(PAT) == F.lit(name)).select(*own, F.col(SEQ), F.col(FAIL), F.col(FAILED_EVENT))
