"""`--engine local`: run a compiled graph in-process with the reference executor, no JVM.

    stats = run_local(graph, sources={"cdr1": "file:in/cdr1"}, sinks={"bill": "file:out"},
                      stores=None, dead_letter=None, until_idle=True, poll_interval=1.0)

- Sources (`deployer.connectors.files`): `file:DIR` or `-` (stdin); `redis://host:port/db?stream=KEY` reads a Redis
  stream (`deployer.connectors.redis_stream`; with `until_idle`, the run ends when no entry arrives within
  its `block_ms`). A source stream of the script that is not
  given a URI is empty: it ends at once, so merges (Union, Join) do not wait for it.
- Files of different sources are read round-robin, one file at a time; the result does not depend
  on it (the executor orders by event time), but memory does (merges buffer the faster input).
- Without `until_idle`, file sources are watched: new files are read as they appear, every
  `poll_interval` seconds, until `stop` is set or Ctrl-C; then the input is finished as if it
  ended there (buffers flushed, complete windows fired). Stdin ends at end of file.
- Triggers (CREATE TRIGGER) need no binding: their ticks are read from the clock
  (deployer.triggers.clock) at each poll, from the run's start (deployer.local.triggers).
- Sinks: `redis://...?stream=KEY` appends each result as an entry `data` = its JSON line;
  `file:DIR` writes `DIR/<stream>-<run id>.jsonl` (one file per stream per run, created
  with the first result); `console` prints JSON lines to stdout, with a "$stream" member naming
  the stream when several streams share the console. Streams without a sink are not kept.
- Dead letters (bad input records, late events, evaluation and store errors) are JSON lines in
  `<dir>/dead-letter-<run id>.jsonl`, with the stage, reason, stream, node, script line, the
  original record text (input records) or the event's values, and the source file and line.
  `dead_letter` is `file:DIR` (or a bare directory path) or `console` (stderr). Default
  directory: `dead-letter` beside the first file sink's directory, else `./dead-letter`.
- `stores` is used, not closed: whoever opened it closes it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deployer.connectors.files import LineWriter, file_dir, list_files, read_file, read_json_lines
from deployer.connectors.records import RawRecord, converted, event_json, json_value
from deployer.connectors.redis_stream import RedisStreamInput, RedisStreamWriter
from deployer.engine import check_bindings
from deployer.local.events import DeadLetter, RunStats
from deployer.local.executor import LocalExecutor
from deployer.local.triggers import TriggerInput
from deployer.triggers import clock
from operators import graph as g

REDIS_SCHEMES = ("redis://", "rediss://")


def _run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


class _Input:
    """One source stream's input: the files not read yet, or stdin."""

    blocking = False  # `wait` returns at once: the loop sleeps between polls instead

    def __init__(self, stream: str, uri: str):
        self.stream = stream
        self.uri = uri
        self.dir = file_dir(uri)
        if self.dir is None and uri != "-":
            raise ValueError(f"source '{stream}': unsupported URI {uri!r}; use file:DIR or -")
        self.seen: set[Path] = set()
        self.done = False  # stdin read to its end

    def next_batch(self) -> Iterator[RawRecord] | None:
        """Records of the next unread file (or all of stdin), or None when there is nothing new."""
        if self.dir is None:
            if self.done:
                return None
            self.done = True
            return read_json_lines(sys.stdin, "<stdin>")
        for path in list_files(self.dir):
            if path not in self.seen:
                self.seen.add(path)
                return read_file(path)
        return None

    def wait(self) -> bool:
        return False

    def close(self) -> None:
        pass


def _input(stream: str, uri: str) -> _Input | RedisStreamInput:
    if uri.lower().startswith(REDIS_SCHEMES):
        return RedisStreamInput(stream, uri)
    return _Input(stream, uri)


class _Outputs:
    def __init__(self, graph: g.Graph, sinks: Mapping[str, str], dead_letter: str | None, run_id: str):
        self.names: dict[str, tuple[str, ...]] = {}
        self.writers: dict[str, LineWriter | RedisStreamWriter] = {}
        consoles = [s for s, uri in sinks.items() if uri == "console"]
        self.tagged = set(consoles) if len(consoles) > 1 else set()
        streams = {s.lower(): s for s in graph.streams}
        first_dir: Path | None = None
        for stream, uri in sinks.items():
            name = streams[stream.lower()]  # run_local checked it (check_bindings)
            self.names[name] = graph.stream_schema(name).names
            if uri == "console":
                self.writers[name] = LineWriter(None, sys.stdout)
                continue
            if uri.lower().startswith(REDIS_SCHEMES):
                self.writers[name] = RedisStreamWriter(uri)
                continue
            d = file_dir(uri)
            if d is None:
                raise ValueError(f"sink '{stream}': unsupported URI {uri!r}; use file:DIR or console")
            d.mkdir(parents=True, exist_ok=True)
            first_dir = first_dir or d
            self.writers[name] = LineWriter(d / f"{name}-{run_id}.jsonl")
        if dead_letter == "console":
            self.dead = LineWriter(None, sys.stderr)
        else:
            d = file_dir(dead_letter) if dead_letter else None
            if dead_letter and d is None:
                d = Path(dead_letter)
            if d is None:
                d = first_dir.parent / "dead-letter" if first_dir is not None else Path("dead-letter")
            self.dead = LineWriter(d / f"dead-letter-{run_id}.jsonl")

    def output(self, stream: str, event: tuple[Any, ...]) -> None:
        w = self.writers.get(stream)
        if w is None:
            return
        line = event_json(self.names[stream], event)
        if stream in self.tagged:
            line = json.dumps({"$stream": stream}, ensure_ascii=False)[:-1] + ", " + line[1:]
        w.write(line)

    def dead_letter(self, dl: DeadLetter) -> None:
        doc: dict[str, Any] = {"stage": dl.stage, "reason": dl.reason}
        for key in ("stream", "node", "line", "source", "record"):
            value = getattr(dl, key)
            if value is not None:
                doc[key] = value
        if dl.event is not None:
            doc["event"] = [json_value(v) for v in dl.event]
        self.dead.write(json.dumps(doc, ensure_ascii=False, default=str))

    def flush(self) -> None:
        for w in (*self.writers.values(), self.dead):
            w.flush()

    def close(self) -> None:
        for w in (*self.writers.values(), self.dead):
            w.close()


def run_local(
    graph: g.Graph,
    sources: Mapping[str, str],
    sinks: Mapping[str, str],
    stores: Any | None = None,
    dead_letter: str | None = None,
    until_idle: bool = True,
    poll_interval: float = 1.0,
    stop: threading.Event | None = None,
) -> RunStats:
    """Run `graph` over its inputs; return the run's counters (see the module docstring)."""
    check_bindings(graph, dict(sources), dict(sinks))
    declared = {s.stream.lower(): s for s in graph.sources()}
    inputs: list[_Input | RedisStreamInput | TriggerInput] = [
        _input(declared[s.lower()].stream, uri) for s, uri in sources.items()
    ]
    ticking = clock.current()
    inputs += [TriggerInput(s, ticking) for s in graph.sources() if s.trigger is not None]
    outputs = _Outputs(graph, sinks, dead_letter, _run_id())
    ex = LocalExecutor(graph, stores, on_output=outputs.output, on_dead_letter=outputs.dead_letter)
    given = {i.stream.lower() for i in inputs}  # with the triggers, which need no binding
    for s in graph.sources():
        if s.stream.lower() not in given:
            ex.end_stream(s.stream)
    try:
        # Ctrl-C ends a watching run: the input is finished as if it ended there.
        with contextlib.suppress(KeyboardInterrupt):
            _loop(ex, inputs, outputs, until_idle, poll_interval, stop)
        ex.finish()
    finally:
        outputs.close()
        for inp in inputs:
            inp.close()
    return ex.stats


def _loop(
    ex: LocalExecutor,
    inputs: list[_Input | RedisStreamInput | TriggerInput],
    outputs: _Outputs,
    until_idle: bool,
    poll_interval: float,
    stop: threading.Event | None,
) -> None:
    while True:
        progressed = False
        for inp in inputs:
            batch = inp.next_batch()
            if batch is None:
                continue
            progressed = True
            _feed(ex, inp.stream, batch)
            if inp.uri == "-":
                ex.end_stream(inp.stream)
        outputs.flush()
        if progressed:
            continue
        if stop is not None and stop.is_set():
            return
        waiting = [i for i in inputs if i.blocking]
        if waiting:
            # Redis streams: a blocking read (block_ms each) stands in for the sleep; if none of
            # them got a new entry in that time, the input is idle.
            if not any(i.wait() for i in waiting) and until_idle:
                return
            continue
        if until_idle:
            return
        if stop is not None:
            stop.wait(poll_interval)
        else:
            time.sleep(poll_interval)


def _feed(ex: LocalExecutor, stream: str, records: Iterator[RawRecord]) -> None:
    schema = ex.source(stream).node.schema
    for rec in records:
        values, reason = converted(rec, schema)
        if reason is None:
            ex.push(stream, values)
        else:
            ex.reject(stream, reason, rec.text, rec.source)
