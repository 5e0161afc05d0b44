"""The differential harness: one CPL script, the same input files, both engines, outputs compared.

(A module of its own, not conftest: `from conftest import` would pick whichever conftest.py pytest
imported last.)

    ref, spk = run_both(spark, tmp_path, SCRIPT, {"s": [file1_rows, file2_rows]}, sinks=["out"])
    assert_same(ref, spk, "out")

- Inputs are JSON-lines files, written one by one with increasing modification times, so Spark's
  file source (which orders by mtime) and the local engine (which orders by name) read them in the
  same order. Each inner list of rows is one file.
- The reference side is `deployer.local.driver.run_local` (the reference executor behind the local
  engine's file I/O); the Spark side is `SparkDeployment` on the session fixture's SparkSession with
  `until_idle=True`. Both write file sinks and dead letters, which are read back as JSON.
- Comparison is as multisets, and where the script defines an order (an Aggregate's outputs of one
  group) as sequences per group. Doubles compare to 12 significant digits: a sum of doubles depends
  on the order of the additions, which Spark does not fix.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import sqlite3
import textwrap
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict, Unpack

from cpl.compiler import compile_script
from deployer.local.driver import run_local
from deployer.spark.run.deployment import SparkDeployment
from operators import graph as g
from stores.bindings import StoreBindings
from stores.sql.describe import bindings_describer

T0 = datetime(2026, 1, 1, tzinfo=UTC)

Row = dict[str, Any]
Files = Sequence[Sequence[Row]]  # one source's input: a list of files, each a list of records


def iso(ts: datetime) -> str:
    return (
        ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        + (f".{ts.microsecond:06d}".rstrip("0") if ts.microsecond else "")
        + "Z"
    )


def at(seconds: float = 0, *, days: int = 0, hours: float = 0, minutes: float = 0) -> str:
    """ISO text of a time `days/hours/minutes/seconds` after 2026-01-01T00:00:00Z."""
    return iso(T0 + timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds))


# ---- inputs ----------------------------------------------------------------------------------------------

_MTIME = [time.time() - 3600.0]  # strictly increasing modification times across the whole run


def write_files(directory: Path, files: Files, ext: str = "jsonl") -> None:
    """One file per inner list, named in order, each with a later mtime than the one before."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(files):
        path = directory / f"part-{i:04d}.{ext}" if ext else directory / f"part-{i:04d}"
        while path.exists():  # a second write_files into the same directory appends after it
            i += 1000
            path = directory / f"part-{i:04d}.{ext}"
        text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
        path.write_text(text, encoding="utf-8")
        _MTIME[0] += 2.0
        os.utime(path, (_MTIME[0], _MTIME[0]))


def chunks(rows: Sequence[Row], n: int) -> list[list[Row]]:
    """Split rows into n files of (nearly) equal size, keeping their order."""
    size = max(1, math.ceil(len(rows) / n))
    return [list(rows[i : i + size]) for i in range(0, len(rows), size)]


def split_by_time(rows: Sequence[Row], field_name: str, bounds: Sequence[str]) -> list[list[Row]]:
    """Split time-ordered rows into files at the given ISO instants (same cut points for every
    source: then no source's next file starts before another's previous one ended)."""
    out: list[list[Row]] = [[] for _ in range(len(bounds) + 1)]
    for r in rows:
        k = sum(1 for b in bounds if r[field_name] >= b)
        out[k].append(r)
    return [f for f in out if f]


def cdrs(
    n: int,
    *,
    seed: int,
    start: datetime = T0,
    mean_gap_s: int = 300,
    callers: int = 20,
    null_every: int = 0,
) -> list[Row]:
    """`n` call records in event-time order (deterministic for a seed); ties in time happen."""
    rnd = random.Random(seed)
    t = start
    out = []
    for i in range(n):
        t += timedelta(seconds=rnd.randint(0, 2 * mean_gap_s))
        caller: int | None = rnd.randint(1, callers)
        if null_every and i % null_every == null_every - 1:
            caller = None
        out.append(
            {
                "idcaller": caller,
                "idreceiver": rnd.randint(1, 50),
                "duration": rnd.choice([0, 5, 9, 10, 11, 30, 60, 120, 600, 3600]) + rnd.randint(0, 3),
                "timestamp": iso(t),
            }
        )
    return out


# ---- running -------------------------------------------------------------------------------------------


@dataclass
class Outputs:
    """One engine's results: rows per sink stream (file order) and its dead letters."""

    engine: str
    streams: dict[str, list[Row]] = field(default_factory=dict)
    dead: list[Row] = field(default_factory=list)

    def __getitem__(self, stream: str) -> list[Row]:
        return self.streams[stream]


def call_files(n: int) -> list[list[Any]]:
    """`n` files of eight events of a stream `calls` (k, caller, n = k % 4, ts), each with every kind
    of a source's dead letter: a line that does not parse, a record that does not convert, an event
    without event time and, after the first file, a late event (its file's events are past it)."""

    def event(k: int, seconds: int) -> dict[str, Any]:
        return {"k": k, "caller": k % 3, "n": k % 4, "ts": iso(T0 + timedelta(seconds=seconds))}

    files: list[list[Any]] = []
    for f in range(n):
        rows: list[Any] = [event(10 * f + i, 20 * f + 2 * i) for i in range(8)]
        rows.insert(3, "{not json")
        rows.insert(5, {"k": "seven", "caller": 1, "n": 1, "ts": iso(T0)})
        rows.append({"k": 100 + f, "caller": 2, "n": 1, "ts": None})
        if f:
            rows.append(event(200 + f, 20 * f - 15))
        files.append(rows)
    return files


def read_jsonl(directory: Path, prefix: str) -> list[Row]:
    """Rows of every `prefix*.jsonl` file in name order (a Spark sink writes one file per batch)."""
    if not directory.is_dir():
        return []
    rows: list[Row] = []
    for p in sorted(directory.iterdir()):
        if p.name.startswith(prefix) and p.name.endswith(".jsonl"):
            rows += [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
    return rows


def collect(engine: str, out: Path, dead: Path, streams: Iterable[str]) -> Outputs:
    res = Outputs(engine)
    for s in streams:
        res.streams[s] = read_jsonl(out, f"{s}-")
    res.dead = read_jsonl(dead, "dead-letter-")
    return res


def prepare(tmp: Path, inputs: Mapping[str, Files]) -> dict[str, str]:
    """Write each source's files under tmp/in/<stream>; the --source URIs."""
    uris = {}
    for stream, files in inputs.items():
        d = tmp / "in" / stream
        write_files(d, files)
        uris[stream] = f"file:{d}"
    return uris


def sqlite_store(path: Path, script: str) -> str:
    """A SQLite file at `path` made by `script` (its tables and rows); its URL for a data store."""
    db = sqlite3.connect(path)
    db.executescript(script)
    db.close()
    return f"sqlite:///{path}"


def sqlite_rows(url: str, query: str) -> list[tuple[Any, ...]]:
    """The rows of `query` in the SQLite file of `url` (`sqlite_store`'s)."""
    db = sqlite3.connect(url[len("sqlite:///") :])
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


def run_reference(
    graph: g.Graph,
    tmp: Path,
    sources: Mapping[str, str],
    sinks: Sequence[str],
    stores: StoreBindings | None = None,
) -> Outputs:
    """`stores`: the StoreBindings `deployer.runner.bind_stores` returns."""
    from stores.registry import StoreRegistry

    out, dead = tmp / "ref-out", tmp / "ref-dead"
    registry = StoreRegistry(stores) if stores is not None else None
    try:
        run_local(
            graph,
            sources=sources,
            sinks={s: f"file:{out}" for s in sinks},
            stores=registry,
            dead_letter=f"file:{dead}",
            until_idle=True,
        )
    finally:
        if registry is not None:
            registry.close()
    return collect("reference", out, dead, sinks)


class RunOptions(TypedDict, total=False):
    """`run_spark`'s and `run_deployment`'s options: the checkpoint (default tmp/checkpoint), files
    per micro-batch, the sinks' and dead letters' directories (tmp/spark-out, tmp/spark-dead), stores."""

    checkpoint: Path | None
    max_files: int | None
    out: Path | None
    dead: Path | None
    stores: StoreBindings | None


def run_spark(
    spark: Any,
    graph: g.Graph,
    tmp: Path,
    sources: Mapping[str, str],
    sinks: Sequence[str],
    **options: Unpack[RunOptions],
) -> Outputs:
    run_deployment(spark, graph, tmp, sources, sinks, **options)
    return collect(
        "spark", options.get("out") or tmp / "spark-out", options.get("dead") or tmp / "spark-dead", sinks
    )


def run_deployment(
    spark: Any,
    graph: g.Graph,
    tmp: Path,
    sources: Mapping[str, str],
    sinks: Sequence[str],
    **options: Unpack[RunOptions],
) -> SparkDeployment:
    """`run_spark`'s deployment, run until idle, for a test that looks at its queries."""
    deployment = SparkDeployment(
        spark,
        graph,
        sources,
        {s: f"file:{options.get('out') or tmp / 'spark-out'}" for s in sinks},
        str(options.get("checkpoint") or tmp / "checkpoint"),
        dead_letter=f"file:{options.get('dead') or tmp / 'spark-dead'}",
        stores=options.get("stores"),
        until_idle=True,
        max_files_per_trigger=options.get("max_files"),
    )
    deployment.run(out=io.StringIO())
    return deployment


def run_resumed(
    spark: Any,
    graph: g.Graph,
    tmp: Path,
    stream: str,
    files: Files,
    sinks: Sequence[str],
    earlier: Mapping[str, Any],
    monkeypatch: Any,
) -> tuple[Outputs, Outputs, Path]:
    """A run over the first half of `files` (into checkpoint tmp/ck, one file a micro-batch, with
    the attributes `earlier` of deployer.spark.run.inputs set as an earlier layout had them), then
    the rest written into the same directory and the run resumed: (the reference executor's outputs
    over all of them, Spark's, the checkpoint)."""
    from deployer.spark.run import inputs

    half = len(files) // 2
    sources = prepare(tmp, {stream: files[:half]})
    ck = tmp / "ck"
    with monkeypatch.context() as patch:
        for name, value in earlier.items():
            patch.setattr(inputs, name, value)
        run_spark(spark, graph, tmp, sources, sinks, checkpoint=ck, max_files=1)
    write_files(tmp / "in" / stream, files[half:])
    spk = run_spark(spark, graph, tmp, sources, sinks, checkpoint=ck, max_files=1)
    return run_reference(graph, tmp / "ref", sources, sinks), spk, ck


def sequencer_modes(ck: Path) -> set[str]:
    """The time mode Spark recorded for each Sequencer of the checkpoint (its state: "stream")."""
    modes = set()
    for path in ck.glob("*/state/*/_metadata/v2/*"):
        if path.name.startswith("."):
            continue
        for line in path.read_bytes().decode("utf-8", "replace").splitlines():
            if line.startswith('{"operatorInfo"'):
                props = json.loads(json.loads(line)["operatorPropertiesJson"])
                if any(v["stateName"] == "stream" for v in props["stateVariables"]):
                    modes.add(props["timeMode"])
    return modes


def compile_text(script: str, stores: StoreBindings | None = None) -> g.Graph:
    """The script's graph; with `stores`, compiled as `cep run` compiles it: its SELECTs' result
    types described by those stores (cpl.describe)."""
    describe = bindings_describer(stores) if stores is not None else None
    return compile_script(textwrap.dedent(script), describe=describe).graph


def run_both(
    spark: Any,
    tmp: Path,
    script: str,
    inputs: Mapping[str, Files],
    sinks: Sequence[str],
    *,
    max_files: int | None = None,
    stores: StoreBindings | None = None,
    describe: bool = False,
) -> tuple[Outputs, Outputs]:
    """`describe`: compile with the result types the `stores` describe, as `cep run` does."""
    graph = compile_text(script, stores if describe else None)
    sources = prepare(tmp, inputs)
    ref = run_reference(graph, tmp, sources, sinks, stores)
    spk = run_spark(spark, graph, tmp, sources, sinks, max_files=max_files, stores=stores)
    return ref, spk


# ---- comparing -----------------------------------------------------------------------------------------


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.12g}")
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    return v


def canon(row: Row) -> tuple[tuple[str, Any], ...]:
    """A hashable form of a row that keeps field order (sinks write fields in schema order)."""
    return tuple((k, _norm(v)) for k, v in row.items())


def multiset(rows: Iterable[Row]) -> Counter[tuple[tuple[str, Any], ...]]:
    return Counter(canon(r) for r in rows)


def diff_text(ref: Sequence[Row], spk: Sequence[Row], key: str = "k") -> str:
    a, b = multiset(ref), multiset(spk)
    if ref and key in ref[0]:
        # Rows carry a unique event id: show what differs field by field.
        rk = {r[key]: r for r in ref}
        sk = {r[key]: r for r in spk}
        lines = []
        for k in sorted(set(rk) | set(sk), key=str):
            x, y = rk.get(k), sk.get(k)
            if x is None or y is None:
                lines.append(f"{key}={k}: reference {x} / spark {y}")
                continue
            fields = [f"{f}: {x[f]!r} / {y.get(f)!r}" for f in x if _norm(x[f]) != _norm(y.get(f))]
            if fields:
                lines.append(f"{key}={k}: " + "; ".join(fields))
        if lines:
            return f" ({len(lines)} differ; reference / spark)\n" + "\n".join(lines[:25])
    only_ref = list((a - b).elements())[:10]
    only_spk = list((b - a).elements())[:10]
    return f"\nonly in reference ({sum((a - b).values())}): {only_ref}\nonly in spark ({sum((b - a).values())}): {only_spk}"


def assert_same(ref: Outputs, spk: Outputs, stream: str, *, min_rows: int = 1, ordered: bool = False) -> None:
    """Same rows (as a multiset) on both engines, and at least `min_rows` of them; with `ordered`,
    in the same order too (Spark sinks write each batch in the reference's order: event time,
    then arrival; so this holds when the batches split the input in event-time order)."""
    r, s = ref[stream], spk[stream]
    assert len(r) >= min_rows, f"the reference produced only {len(r)} rows on {stream}: a weak test"
    assert multiset(r) == multiset(s), f"{stream}: {len(r)} rows vs {len(s)}" + diff_text(r, s)
    if ordered:
        first = next(
            i for i, (x, y) in enumerate(zip([*r, None], [*s, None], strict=True)) if x != y or x is None
        )
        assert [canon(x) for x in r] == [canon(x) for x in s], f"{stream}: order differs from row {first}"


def assert_same_order_per_group(ref: Outputs, spk: Outputs, stream: str, keys: Sequence[str]) -> None:
    """Within each group (equal values of `keys`), the outputs come in the same order."""

    def by_group(rows: list[Row]) -> dict[Any, list[Any]]:
        out: dict[Any, list[Any]] = {}
        for r in rows:
            out.setdefault(tuple(r[k] for k in keys), []).append(canon(r))
        return out

    assert by_group(ref[stream]) == by_group(spk[stream])


def dead_summary(rows: Iterable[Row]) -> Counter[tuple[Any, ...]]:
    """Dead letters as (stage, reason, stream, node, line, event, record, source) for comparison."""
    return Counter(
        (
            r.get("stage"),
            r.get("reason"),
            r.get("stream"),
            r.get("node"),
            r.get("line"),
            _norm(r.get("event")),
            r.get("record"),
            r.get("source"),
        )
        for r in rows
    )


def assert_same_dead_letters(ref: Outputs, spk: Outputs) -> None:
    a, b = dead_summary(ref.dead), dead_summary(spk.dead)
    if a != b:
        only_ref = sorted((a - b).elements(), key=str)[:12]
        only_spk = sorted((b - a).elements(), key=str)[:12]
        lines = [
            "dead letters differ; only in reference:",
            *map(str, only_ref),
            "only in spark:",
            *map(str, only_spk),
        ]
        raise AssertionError("\n".join(lines))


def query_plans(deployment: SparkDeployment) -> dict[str, str]:
    """Each query's plans, as `StreamingQuery.explain` prints them (after its run, its last batch's)."""
    plans = {}
    for query in deployment.queries:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            query.explain(extended=True)
        plans[query.name] = out.getvalue()
    return plans


def physical(explained: str) -> str:
    """The physical plan of `query_plans`' text."""
    return explained.split("== Physical Plan ==", 1)[1]
