"""Redis Streams on Spark: a Python data source whose offsets are entry ids (the sink: redis_sink.py).

URIs, entry ids, the reading of an entry and the local engine's reader and writer are engine-neutral
(deployer.connectors.redis_stream, whose docstring describes both engines' behaviour).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from deployer.connectors.records import convert_record
from deployer.connectors.redis_stream import (
    DEFAULT_MAX_RECORDS,
    PAGE,
    RedisStreamError,
    StreamURI,
    connect,
    entry_text,
    format_id,
    id_ranges,
    last_id,
    next_id,
    parse_id,
    parse_stream_uri,
    previous_id,
    seq_of,
)
from deployer.spark.streams.parsed_rows import RowsBuilder, arrow_schema, parsed_schema, spooling
from deployer.spark.streams.sources import reader_spool, split
from operators import graph as g
from operators.datatypes import Schema
from stores.errors import scrub

# ---- Spark source --------------------------------------------------------------------------------------

NAME = "cep_redis_stream"
RAW = "__raw"
REASON = "__reason"
ORIGIN = "__origin"

# The id of the COUNT-th entry in [ARGV[1], ARGV[2]] (or of the last one, if fewer) and how many
# entries that is; {false, 0} if there are none. Pages through the range on the server so that only
# one id crosses the network. Exclusive '(' bounds need Redis >= 6.2.
_NTH_ID = """
local from, left, last, seen = ARGV[1], tonumber(ARGV[3]), false, 0
while left > 0 do
  local page = redis.call('XRANGE', KEYS[1], from, ARGV[2], 'COUNT', math.min(left, 1000))
  if #page == 0 then break end
  last = page[#page][1]
  left = left - #page
  seen = seen + #page
  from = '(' .. last
end
return {last, seen}
"""
# Entries one script call may skip: a script blocks the server while it runs (~1-2 ms per 1,000).
SKIP_PER_CALL = 10_000

_CLIENTS: dict[tuple[Any, ...], redis.Redis] = {}
_CLIENTS_LOCK = threading.Lock()


def _options(s: StreamURI, parts: int) -> dict[str, str]:
    u = s.url
    opts = {
        "host": u.host or "localhost",
        "port": str(u.port or 6379),
        "db": u.database or "0",
        "tls": "true" if u.tls else "false",
        "stream": s.key,
        "start": s.start,
        "maxRecordsPerBatch": str(s.max_records),
        "partitions": str(max(parts, 1)),
        "shown": s.redacted(),
    }
    if u.username:
        opts["username"] = u.username
    if u.password is not None:
        opts["password"] = u.password  # Spark redacts options named like "password" in plans and logs
    return opts


def _client(options: Any) -> redis.Redis:
    """One client per connection target per Python process (Spark reuses its Python workers)."""
    target = tuple(options.get(k) for k in ("host", "port", "db", "tls", "username", "password"))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(target)
        if client is None:
            # Imported here, as in deployer.connectors.redis_stream: stores.urls pulls in SQLAlchemy,
            # which the Python workers that run this data source need not import otherwise.
            from stores.urls import StoreURL

            url = StoreURL(
                "redis",
                host=target[0],
                port=int(target[1]),
                database=target[2],
                tls=target[3] == "true",
                username=target[4],
                password=target[5],
            )
            client = _CLIENTS[target] = connect(url)
        return client


class _Range(InputPartition):
    def __init__(self, first: str, last: str):
        super().__init__((first, last))
        self.first = first
        self.last = last


class RedisStreamDataSource(DataSource):
    """Rows (id, value) of a Redis stream; options as written by `_options`."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "id string, value string"

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return RedisStreamReader(self.options)


class RedisStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Any):
        self.options = dict(options)
        self.key = self.options["stream"]
        self.max_records = int(self.options.get("maxrecordsperbatch", DEFAULT_MAX_RECORDS))
        self.parts = int(self.options.get("partitions", 1))
        self.target: str | None = None  # Trigger.AvailableNow: the newest id when the query started
        self._script: Any = None

    def _c(self) -> redis.Redis:
        return _client(self.options)

    def _newest(self) -> str:
        try:
            return last_id(self._c(), self.key) or "0-0"
        except redis.RedisError as e:
            raise self._error(e) from None

    def _error(self, e: Exception) -> RedisStreamError:
        return RedisStreamError(
            f"{self.options.get('shown')}: {scrub(str(e), [self.options.get('password')])}"
        )

    def initialOffset(self) -> dict:
        start = self.options.get("start", "0")
        return {"id": self._newest() if start == "$" else format_id(parse_id(start))}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._newest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if start.get("end") and (self.target is None or parse_id(self.target) <= parse_id(start["id"])):
            return start  # ended, and nothing arrived since: no batch
        after = start["id"]
        upto = self.target or "+"
        if isinstance(limit, ReadMaxRows):
            if self._script is None:
                self._script = self._c().register_script(_NTH_ID)
            end, left = after, limit.max_rows
            try:
                while left > 0:
                    step = min(left, SKIP_PER_CALL)
                    found, seen = self._script(keys=[self.key], args=[next_id(end), upto, step])
                    if found:
                        end = found.decode()
                    left -= seen
                    if seen < step:
                        break
            except redis.RedisError as e:
                raise self._error(e) from None
        else:  # ReadAllAvailable, or a limit this source does not implement
            end = self.target or self._newest()
        # A stream deleted and re-created may have ids below the start: nothing to read from it then.
        end = end if parse_id(end) > parse_id(after) else after
        if self.target is not None and parse_id(end) >= parse_id(self.target):
            # The last micro-batch of an availableNow run carries the end-of-input row (file_source).
            return {"id": end, "end": True}
        return {"id": end}

    def reportLatestOffset(self) -> dict | None:
        return {"id": self._newest()}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        parts = self._ranges(start, end)
        if end.get("end") and end != start:
            parts.append(_Range("", ""))  # the end-of-input row
        return parts

    def _ranges(self, start: dict, end: dict) -> list[InputPartition]:
        after, upto = start["id"], end["id"]
        if self.parts > 1 and parse_id(upto) > parse_id(after):
            # Split from the first entry, not from the start offset: after `0-0` (a new query) the
            # id space below the first entry's time would take all but the last partition.
            try:
                first: Any = self._c().xrange(self.key, next_id(after), upto, count=1)
            except redis.RedisError as e:
                raise self._error(e) from None
            if not first:
                return []
            after = previous_id(first[0][0])
        return [_Range(a, b) for a, b in id_ranges(after, upto, self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Range)
        if not partition.first:
            yield pa.RecordBatch.from_arrays(
                [pa.nulls(1, pa.string()), pa.nulls(1, pa.string())], names=["id", "value"]
            )
            return
        client = _client(self.options)
        first = partition.first
        while True:
            try:
                page: Any = client.xrange(self.key, first, partition.last, count=PAGE)
            except redis.RedisError as e:
                raise self._error(e) from None
            if not page:
                return
            ids = [i.decode() for i, _ in page]
            yield pa.RecordBatch.from_arrays(
                [pa.array(ids, pa.string()), pa.array([entry_text(f) for _, f in page], pa.string())],
                names=["id", "value"],
            )
            if len(page) < PAGE:
                return
            first = next_id(ids[-1])

    def commit(self, end: dict) -> None:
        pass  # the stream is not ours to trim


def register(spark: SparkSession) -> None:
    spark.dataSource.register(RedisStreamDataSource)


def _parser(key: str, shown: str, schema: Schema, spooled: dict[str, Any] | None) -> Any:
    """The stage that parses a Redis stream's entries into its parsed rows, and, given `spooled`
    (sources.reader_spool), spools its rejected records as it parses them (parsed_rows.spooling)."""
    arrow = arrow_schema(schema)

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from spooling(rows_of(batches), spooled)

    def rows_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = RowsBuilder(arrow)
            for entry_id, text in zip(
                batch.column("id").to_pylist(), batch.column("value").to_pylist(), strict=True
            ):
                if entry_id is None:  # the end-of-input row
                    rows.end()
                    continue
                origin = f"{shown} entry {entry_id}"
                values, reason = convert_record(text, origin, schema)
                rows.record(values, seq_of(key, entry_id), reason, text, origin)
            yield rows.batch()

    return parse


def redis_stream_source(spark: SparkSession, uri: str, node: g.Source) -> tuple[DataFrame, DataFrame]:
    """A Redis stream → `sources.split`'s (events, dead letters), as `sources.file_source`."""
    return split(redis_parsed(spark, uri, node), node)


def redis_parsed(spark: SparkSession, uri: str, node: g.Source, spool: Any = None) -> DataFrame:
    """A Redis stream → its parsed rows (`parsed_rows.parsed_schema`), for `sources.split`; `spool`:
    the deployment's spool, whose `input-<stream>` label it has, its parsing stage spools the
    stream's rejected records (sources.reader_spool)."""
    s = parse_stream_uri(uri)
    register(spark)
    reader = spark.readStream.format(NAME)
    for k, v in _options(s, spark.sparkContext.defaultParallelism).items():
        reader = reader.option(k, v)
    out = parsed_schema(node.schema)
    spooled = None if spool is None else reader_spool(node, spool, False)
    return reader.load().mapInArrow(_parser(s.key, s.redacted(), node.schema, spooled), out)
