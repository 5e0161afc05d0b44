"""Redis Streams as sources and sinks, for both engines.

URI: `redis://[[user]:password@]host:port/db?stream=KEY[&option=value...]` (`rediss://` for TLS;
`password_file=` as for data store URLs, see `stores.urls`). The password is only ever handed to
the redis client: URIs are shown redacted, and the Spark source passes it in an option named
`password`, which Spark's `spark.redaction.regex` hides in plans and logs. Options:

    stream=KEY              the stream's key (required)
    start=0                 where a new reader starts: `0` the first entry (default), `$` only
                            entries added after it starts, or an entry id (the entries after it)
    maxRecordsPerBatch=N    Spark: at most N entries per micro-batch (default 100000);
                            local engine: at most N entries per read
    block_ms=N              local engine: how long a read waits for a new entry (default 1000); with
                            `--until-idle` the run ends when none arrives within that time

Reading. An entry with the single field `data` is read as that field's text (JSON of one event, as
this module's sinks write it); an entry with other or several fields is read as the JSON object of
all its fields (`XADD s * caller 7 duration 30` works: the converter takes numbers as text). The
text goes through the same converter as file records (`deployer.connectors.files.to_event`), so a malformed entry
is rejected with the same reason it would get in a file. An event's `__seq` is the stream key and
the entry id, both parts zero-padded: it sorts in arrival order and is the same on every replay.

Spark source (`redis_stream_source`): a Python data source whose offsets are entry ids. A
micro-batch is the entries in (previous end, end]; `end` is the newest entry, or the N-th after the
start (`maxRecordsPerBatch`, found by a server-side Lua script that returns only that id, skipping
at most 10,000 entries per call so as not to stall the server). Entry ids only grow, so the range
read again on replay holds the same entries, unless they were trimmed in between (XTRIM/MAXLEN):
trimmed entries are gone, not an error. From its first entry, the range is split evenly over the id
space into `partitions` ranges (default: Spark's default parallelism), read with paged XRANGE.

Spark sink (`redis_stream_writer`): foreachBatch; one MULTI/EXEC per micro-batch holds the XADDs of
its rows, sorted by the `order` columns (event time, then `__seq`, as the reference executor emits
them; field `data` = the event's JSON line, ids `*`), and records the batch id in the hash
`<KEY>:cep:batch`, under the streaming query's id. A replayed batch (id <= recorded) writes nothing.
Explicit entry ids derived from the batch id were the alternative; they were not chosen because
they would not be time-based (XRANGE by time, MINID trimming and other producers' `*` ids would
all break) and because they need a deterministic row order inside a batch, which Spark does not
promise after a shuffle. The marker is keyed by query id, which lives in the checkpoint: another
deployment writing to the same stream, or this one restarted on a fresh checkpoint (batch ids from
0 again), is not mistaken for a replay. The whole batch is one transaction, buffered in the driver
(about 200 bytes per row): micro-batches of millions of rows want a smaller maxRecordsPerBatch.

Local engine: `RedisStreamInput` (`next_batch` reads what is there, `wait` is the blocking XREAD with
`block_ms`) and `RedisStreamWriter` (buffered, one pipelined XADD round trip per flush) have the
interfaces of `deployer.local.driver._Input` and `deployer.connectors.files.LineWriter`. The local sink is at-least-once
like the local file sink: a run that is repeated writes its results again.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from deployer.connectors.records import RawRecord, json_record
from stores.errors import scrub

if TYPE_CHECKING:
    from stores.urls import StoreURL

SCHEMES = ("redis://", "rediss://")
DEFAULT_MAX_RECORDS = 100_000
DEFAULT_BLOCK_MS = 1000
PAGE = 10_000  # entries per XRANGE round trip when reading a range
DATA = "data"
WATCH_RETRIES = 10
_OPTIONS = ("stream", "start", "maxrecordsperbatch", "block_ms")


class RedisStreamError(ValueError):
    pass


# ---- URIs ------------------------------------------------------------------------------------------


def is_redis_stream_uri(uri: str) -> bool:
    return uri.lower().startswith(SCHEMES)


@dataclass(frozen=True, repr=False)
class StreamURI:
    url: StoreURL  # carries the password; prints redacted
    key: str
    start: str = "0"
    max_records: int = DEFAULT_MAX_RECORDS
    block_ms: int = DEFAULT_BLOCK_MS

    def redacted(self) -> str:
        return f"{self.url.redacted()}?{urlencode({'stream': self.key})}"

    def __str__(self) -> str:
        return self.redacted()

    def __repr__(self) -> str:
        return f"StreamURI({self.redacted()!r})"

    def client(self) -> redis.Redis:
        return connect(self.url)

    def error(self, e: Exception, what: str) -> RedisStreamError:
        return RedisStreamError(f"{self.redacted()}: {what}: {scrub(str(e), [self.url.password])}")


def parse_stream_uri(uri: str) -> StreamURI:
    """`redis://...?stream=KEY&...` → StreamURI; StoreConfigError/RedisStreamError if malformed."""
    # Imported here: it pulls in SQLAlchemy and psycopg, which Spark's Python workers, importing this
    # module to run the data source, do not need.
    from stores.urls import parse_store_url, redact_text

    shown = redact_text(uri)
    if not is_redis_stream_uri(uri):
        raise RedisStreamError(f"{shown} is not a redis:// or rediss:// URI")
    parts = urlsplit(uri.strip())
    ours: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if k.lower() in _OPTIONS:
            if k.lower() in ours:
                raise RedisStreamError(f"invalid Redis stream URI {shown}: option {k} given twice")
            ours[k.lower()] = v
        else:
            rest.append((k, v))  # password, password_file: parse_store_url's business
    url = parse_store_url(urlunsplit(parts._replace(query=urlencode(rest))))
    key = ours.get("stream", "")
    if not key:
        raise RedisStreamError(f"invalid Redis stream URI {shown}: add ?stream=KEY")

    def positive(name: str, default: int) -> int:
        raw = ours.get(name.lower())
        if raw is None:
            return default
        if not raw.isdigit() or int(raw) <= 0:
            raise RedisStreamError(f"invalid Redis stream URI {shown}: {name} must be a positive integer")
        return int(raw)

    start = ours.get("start", "0")
    if start not in ("0", "$"):
        try:
            start = format_id(parse_id(start))
        except ValueError:
            raise RedisStreamError(
                f"invalid Redis stream URI {shown}: start must be 0, $ or an entry id, not {start!r}"
            ) from None
    return StreamURI(
        url,
        key,
        start,
        positive("maxRecordsPerBatch", DEFAULT_MAX_RECORDS),
        positive("block_ms", DEFAULT_BLOCK_MS),
    )


def connect(url: StoreURL) -> redis.Redis:
    # redis-py's default retries a failed connection for seconds, a refused password included; a
    # query that cannot read its source should say so at once (Spark retries the task anyway).
    return redis.Redis(**url.redis_kwargs(), retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 3))


# ---- entry ids and values ------------------------------------------------------------------------------

_MAX_PART = 2**64 - 1


def parse_id(text: str | bytes) -> tuple[int, int]:
    s = text.decode() if isinstance(text, bytes) else text
    ms, _, seq = s.partition("-")
    a, b = int(ms), int(seq or 0)
    if not (0 <= a <= _MAX_PART and 0 <= b <= _MAX_PART):
        raise ValueError(f"entry id {s!r} is out of range")
    return a, b


def format_id(i: tuple[int, int]) -> str:
    return f"{i[0]}-{i[1]}"


def _as_int(i: tuple[int, int]) -> int:
    return (i[0] << 64) | i[1]


def _from_int(n: int) -> tuple[int, int]:
    return n >> 64, n & _MAX_PART


def next_id(text: str) -> str:
    """The smallest id after `text`: an inclusive XRANGE bound for "after text" (any Redis version)."""
    return format_id(_from_int(_as_int(parse_id(text)) + 1))


def previous_id(text: str) -> str:
    """The largest id before `text` (the exclusive start of a range beginning at `text`)."""
    return format_id(_from_int(_as_int(parse_id(text)) - 1))


def id_ranges(after: str, upto: str, parts: int) -> list[tuple[str, str]]:
    """(after, upto] split into at most `parts` non-empty, contiguous, inclusive (first, last) ranges."""
    lo, hi = _as_int(parse_id(after)), _as_int(parse_id(upto))
    if hi <= lo:
        return []
    cuts = sorted({lo + (hi - lo) * i // max(parts, 1) for i in range(max(parts, 1))} | {hi})
    return [(format_id(_from_int(a + 1)), format_id(_from_int(b))) for a, b in itertools.pairwise(cuts)]


def seq_of(key: str, entry_id: str) -> str:
    """`__seq` of an entry: sorts in arrival order (ids compare as numbers once zero-padded)."""
    ms, seq = parse_id(entry_id)
    return f"{key}\x00{ms:020d}-{seq:020d}"


def entry_text(fields: dict[bytes, bytes]) -> str:
    """The record text of an entry: its `data` field alone, else the JSON object of all fields."""
    data = fields.get(DATA.encode())
    if data is not None and len(fields) == 1:
        return data.decode("utf-8", "replace")
    return json.dumps(
        {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in fields.items()},
        ensure_ascii=False,
    )


def last_id(client: redis.Redis, key: str) -> str | None:
    newest: Any = client.xrevrange(key, "+", "-", count=1)
    return newest[0][0].decode() if newest else None


# ---- local engine ------------------------------------------------------------------------------------


class RedisStreamInput:
    """A source stream of the local engine, read from a Redis stream with XREAD.

    `next_batch` returns the entries that are there (at most maxRecordsPerBatch) as raw records, or
    None at once when there are none. `wait` is the blocking read: it waits up to `block_ms` for new
    entries (kept for the next `next_batch`) and says whether any came; the local loop calls it
    instead of sleeping when no input had anything, and a `--until-idle` run ends when it says no.
    """

    blocking = True

    def __init__(self, stream: str, uri: str):
        self.stream = stream
        self.uri = uri
        self.source = parse_stream_uri(uri)
        self.client = self.source.client()
        self.last: str | None = None  # id of the last entry read
        self.ready: list[Any] | None = None  # entries read by `wait`, not handed out yet

    def _read(self, block_ms: int | None) -> list[Any] | None:
        s = self.source
        try:
            if self.last is None:
                self.last = (last_id(self.client, s.key) or "0-0") if s.start == "$" else s.start
            reply: Any = self.client.xread({s.key: self.last}, count=s.max_records, block=block_ms)
        except redis.RedisError as e:
            raise s.error(e, f"reading stream '{self.stream}'") from None
        if not reply or not reply[0][1]:
            return None
        entries: list[Any] = reply[0][1]
        self.last = entries[-1][0].decode()
        return entries

    def next_batch(self) -> Iterator[RawRecord] | None:
        entries, self.ready = (self.ready or self._read(None)), None
        if entries is None:
            return None
        shown = self.source.redacted()
        return iter([json_record(entry_text(f), f"{shown} entry {i.decode()}") for i, f in entries])

    def wait(self) -> bool:
        if self.ready is None:
            self.ready = self._read(self.source.block_ms)
        return self.ready is not None

    def close(self) -> None:
        self.client.close()


class RedisStreamWriter:
    """A sink of the local engine: buffers JSON lines, XADDs them (field `data`) in one pipeline per
    flush (the local loop flushes after each input batch) or every `flush_every` lines."""

    def __init__(self, uri: str, flush_every: int = 10_000):
        self.target = parse_stream_uri(uri)
        self.flush_every = flush_every
        self.pending: list[str] = []
        self.client: redis.Redis | None = None

    def write(self, line: str) -> None:
        self.pending.append(line)
        if len(self.pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        if self.client is None:
            self.client = self.target.client()
        try:
            with self.client.pipeline(transaction=False) as p:
                for line in self.pending:
                    p.xadd(self.target.key, {DATA: line})
                p.execute()
        except redis.RedisError as e:
            raise self.target.error(e, "writing") from None
        self.pending.clear()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self.client is not None:
                self.client.close()
                self.client = None


def marker_key(key: str) -> str:
    """The hash recording, per writer, the last batch written to stream `key` (the Spark sink)."""
    return f"{key}:cep:batch"
