"""Materialize into Redis at pipeline speed: one MULTI/EXEC of server-side scripts per batch.

redis-py spends most of a pipelined HSET in Python building the command (~70,000 rows/s here,
TTL and HDEL included). Here the rows are packed straight into RESP bytes and handed to a Lua
script, `CHUNK_ROWS` rows per EVAL, all inside one MULTI/EXEC with the batch marker:

    MULTI
    EVAL <write> 1 <marker> <layout...> <row 0> <row 1> ...      (one per chunk of rows)
    EVAL <finish> 1 <marker> <ttl> <failed rows and reasons...>
    EXEC

- The marker is a hash: `~done` says the batch took effect, the other fields are the rows that
  failed and why. Every script first looks at `~done`; the first time it is absent, so the rows are
  written and `finish` sets it; a replay finds it and writes nothing. MULTI/EXEC makes the whole
  batch one atomic unit, so no other writer can slip in between.
- A row whose HSET the server refuses (the key holds another type, WRONGTYPE) is caught in the
  script with `redis.pcall`, recorded in the marker with its reason, and reported: the other rows
  are written, as on Postgres.
- Without a marker (the reference executor, no ledger key) the same scripts run with no guard.

Each row carries a NULL mask next to its values, so an empty string and a NULL stay different; a
NULL removes the field (HDEL).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import redis

from stores import arrow
from stores.values import redis_text

CHUNK_ROWS = 10_000
DONE = b"~done"

# KEYS[1]: the marker (absent without a ledger key). ARGV: ttl ms (0: none), the append counter key
# ("" when rows have their own keys), the reason prefix, the batch index of the chunk's first row, the
# batch indexes of its rows when they are not consecutive ("" when they are), the NF field names;
# then per row: its key ("" for appends), its NULL mask ("" for none, else one '0'/'1' per field),
# NF values. The script is generated per field count so that a row without NULLs is one HSET with
# its arguments spelled out: no Lua table per row.
_WRITE = """
local marker = KEYS[1]
if marker and redis.call('HEXISTS', marker, '~done') == 1 then return {0} end
local ttl = tonumber(ARGV[1])
local counter = ARGV[2]
local prefix = ARGV[3]
local base = tonumber(ARGV[4])
local idx = nil
if ARGV[5] ~= '' then
  idx = {}
  for s in string.gmatch(ARGV[5], '[^,]+') do idx[#idx + 1] = s end
end
local F = {%(fields)s}
local head = 5 + %(nf)d
local width = %(nf)d + 2
local n = (#ARGV - head) / width
local seq = 0
if counter ~= '' and n > 0 then
  seq = redis.call('INCRBY', counter, n) - n
  if ttl > 0 then redis.call('PEXPIRE', counter, ttl) end
end
local out = {1}
for r = 0, n - 1 do
  local at = head + r * width
  local key = ARGV[at + 1]
  if counter ~= '' then key = counter .. ':' .. string.format('%%d', seq + r + 1) end
  local mask = ARGV[at + 2]
  local res = nil
  if mask == '' then
    res = redis.pcall('HSET', key, %(hset)s)
  else
    local set, del = {}, {}
    for f = 1, %(nf)d do
      if string.byte(mask, f) == 49 then
        del[#del + 1] = F[f]
      else
        set[#set + 1] = F[f]
        set[#set + 1] = ARGV[at + 2 + f]
      end
    end
    if #set > 0 then res = redis.pcall('HSET', key, unpack(set)) end
    if #del > 0 and not (type(res) == 'table' and res.err) then res = redis.pcall('HDEL', key, unpack(del)) end
  end
  if type(res) == 'table' and res.err then
    local i = idx and idx[r + 1] or string.format('%%d', base + r)
    local reason = prefix .. res.err
    out[#out + 1] = i
    out[#out + 1] = reason
    if marker then redis.call('HSET', marker, i, reason) end
  elseif ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  end
end
return out
"""


@lru_cache(maxsize=64)
def write_script(nf: int) -> bytes:
    return (
        _WRITE
        % {
            "nf": nf,
            "fields": ", ".join(f"ARGV[{6 + f}]" for f in range(nf)),
            "hset": ", ".join(f"F[{f + 1}], ARGV[at + {3 + f}]" for f in range(nf)),
        }
    ).encode()


# KEYS[1]: the marker. ARGV: its TTL in ms, then pairs (row index, reason) refused before writing.
_FINISH = b"""
if redis.call('HEXISTS', KEYS[1], '~done') == 1 then return 0 end
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], '~done', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""


def _command(out: list[bytes], args: Sequence[bytes]) -> None:
    """Append one command in RESP (an array of bulk strings) to `out`."""
    out.append(b"*%d\r\n" % len(args))
    out.extend(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)


def _bulk(texts: list[bytes]) -> list[bytes]:
    return [b"$%d\r\n%b\r\n" % (len(t), t) for t in texts]


def text_values(values: Sequence[Any]) -> list[bytes]:
    """Each value's text (`values.redis_text`), NULL as b"" (its mask says it is NULL).

    Column by column, with the common types special-cased: this loop is the row path's whole cost.
    """
    kinds = {type(v) for v in values}
    kinds.discard(type(None))
    if kinds == {str}:
        return [b"" if v is None else v.encode() for v in values]
    if kinds == {int}:
        return [b"" if v is None else b"%d" % v for v in values]
    if kinds == {float}:
        return [b"" if v is None else repr(v).encode() for v in values]
    if kinds == {datetime}:
        return [
            b"" if v is None else (v.isoformat() if v.tzinfo is UTC else redis_text(v)).encode()
            for v in values
        ]
    return [b"" if v is None else redis_text(v).encode() for v in values]


def encode_column(values: Sequence[Any]) -> list[bytes]:
    """Each value as the RESP bulk string of its text; NULL as an empty one."""
    return _bulk(text_values(values))


def pack_batch(
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    keys: Sequence[str | None],
    good: Sequence[int],
    **kwargs: Any,
) -> tuple[bytes, int]:
    """The MULTI ... EXEC of a batch of Python rows as RESP bytes, and the number of commands queued.

    `good`: the rows to write (the others were refused before, see `refused`); `keys[i]` the Redis
    key of row i (None for appends). Keyword arguments: see `_frame`.
    """

    def chunks() -> Iterator[tuple[Sequence[int], bytes]]:
        for lo in range(0, len(good), CHUNK_ROWS):
            chunk = good[lo : lo + CHUNK_ROWS]
            chosen = [rows[i] for i in chunk]
            columns = list(zip(*chosen, strict=True))
            nulls = {r for c in columns for r, v in enumerate(c) if v is None}
            masks = _bulk(
                [
                    bytes(48 + (c[r] is None) for c in columns) if r in nulls else b""
                    for r in range(len(chosen))
                ]
            )
            row_keys = _bulk([b"" if keys[i] is None else keys[i].encode() for i in chunk])  # type: ignore[union-attr]
            yield (
                chunk,
                b"".join(map(b"".join, zip(row_keys, masks, *map(encode_column, columns), strict=True))),
            )

    consecutive = list(good) == list(range(good[0], good[0] + len(good))) if good else True
    return _frame(fields, chunks(), consecutive=consecutive, **kwargs)


def _frame(
    fields: Sequence[str],
    chunks: Iterable[tuple[Sequence[int], bytes]],
    *,
    consecutive: bool,
    counter: str | None,
    ttl_ms: int | None,
    prefix: str,
    marker: str | None,
    marker_ttl_ms: int,
    refused: dict[int, str],
) -> tuple[bytes, int]:
    """MULTI, one EVAL of the write script per chunk (its batch indexes and its rows, already in
    RESP), the `finish` script when there is a marker, EXEC."""
    nf = len(fields)
    script = write_script(nf)
    guard = [b"1", marker.encode()] if marker is not None else [b"0"]
    names = [f.encode() for f in fields]
    out: list[bytes] = []
    _command(out, [b"MULTI"])
    queued = 0
    for chunk, body in chunks:
        fixed = [
            b"EVAL",
            script,
            *guard,
            str(ttl_ms or 0).encode(),
            (counter or "").encode(),
            prefix.encode(),
            str(chunk[0]).encode(),
            b"" if consecutive else ",".join(map(str, chunk)).encode(),
            *names,
        ]
        out.append(b"*%d\r\n" % (len(fixed) + len(chunk) * (nf + 2)))
        out.extend(_bulk(fixed))
        out.append(body)
        queued += 1
    if marker is not None:
        pairs = [x for i, reason in sorted(refused.items()) for x in (str(i).encode(), reason.encode())]
        _command(out, [b"EVAL", _FINISH, b"1", marker.encode(), str(marker_ttl_ms).encode(), *pairs])
        queued += 1
    _command(out, [b"EXEC"])
    return b"".join(out), queued


# ---- Arrow batches (Spark's): texts and RESP framing by Arrow kernels ----------------------------


@cache
def _scalar(value: bytes) -> pa.Scalar:
    """`value` as a large_binary scalar, made on first use: `pa.scalar` imports pandas (~0.35 s), which
    a run that never writes to Redis need not pay at this module's import."""
    return pa.scalar(value, pa.large_binary())


_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999  # years 1 to 9999


def arrow_texts(col: pa.Array) -> pa.Array:
    """`text_values` of an Arrow column, as large_binary; NULL as b"". Integers, strings, booleans
    and timestamps (ISO 8601 exactly as `datetime.isoformat`) are vectorised; other types (double:
    Python's repr is the contract; decimal) and out-of-range timestamps go through Python."""
    t = col.type
    out: pa.Array | None = None
    if pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        out = col.cast(pa.string())
    elif pa.types.is_boolean(t):
        out = pc.if_else(col, "true", "false")
    elif pa.types.is_timestamp(t) and t.tz is not None:
        us = col.cast(pa.timestamp("us", tz="UTC"))
        bounds = pc.min_max(us.cast(pa.int64()))
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        if lo is None or (lo >= _MIN_US and hi <= _MAX_US):
            whole = pc.floor_temporal(us, unit="second")
            seconds = pc.strftime(whole.cast(pa.timestamp("s", tz="UTC")), format="%Y-%m-%dT%H:%M:%S")
            micros = pc.subtract(us.cast(pa.int64()), whole.cast(pa.int64()))
            fraction = pc.if_else(
                pc.equal(micros, 0),
                "",
                pc.binary_join_element_wise(".", pc.utf8_lpad(micros.cast(pa.string()), 6, "0"), ""),
            )
            out = pc.binary_join_element_wise(seconds, fraction, "+00:00", "")
    if out is None:
        return pa.array(text_values(arrow.column_values(col)), pa.large_binary())
    return out.cast(pa.large_binary()).fill_null(_scalar(b""))


def _resp(texts: pa.Array) -> pa.Array:
    """Each value framed as a RESP bulk string: `$<length>\r\n<bytes>\r\n`."""
    lengths = pc.binary_length(texts).cast(pa.string()).cast(pa.large_binary())
    return pc.binary_join_element_wise(
        _scalar(b"$"), lengths, _scalar(b"\r\n"), texts, _scalar(b"\r\n"), _scalar(b"")
    )


def pack_arrow(
    fields: Sequence[str], data: pa.Table, keys: pa.Array | None, **kwargs: Any
) -> tuple[bytes, int]:
    """`pack_batch` for an Arrow batch whose every row is written: `keys` the Redis key of each row
    (large_binary, no NULL), None for appends."""
    n = data.num_rows
    nf = len(fields)

    def chunks() -> Iterator[tuple[Sequence[int], bytes]]:
        for lo in range(0, n, CHUNK_ROWS):
            part = data.slice(lo, CHUNK_ROWS)
            m = part.num_rows
            columns = [part.column(j).combine_chunks() for j in range(nf)]
            nulls = [c.is_null() for c in columns]
            any_null = nulls[0]
            for x in nulls[1:]:
                any_null = pc.or_(any_null, x)
            if pc.any(any_null).as_py():
                flags = [pc.if_else(x, "1", "0") for x in nulls]
                mask = pc.if_else(any_null, pc.binary_join_element_wise(*flags, ""), "")
            else:
                mask = pa.array([""] * m)
            row_keys = keys.slice(lo, m) if keys is not None else pa.array([b""] * m, pa.large_binary())
            framed = [
                _resp(row_keys),
                _resp(mask.cast(pa.large_binary())),
                *(_resp(arrow_texts(c)) for c in columns),
            ]
            rows = pc.binary_join_element_wise(*framed, _scalar(b""))
            _, offsets_buf, buf = rows.buffers()
            offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=m + 1, offset=rows.offset * 8)
            yield range(lo, lo + m), memoryview(buf)[int(offsets[0]) : int(offsets[m])].tobytes()

    return _frame(fields, chunks(), consecutive=True, **kwargs)


def execute(client: redis.Redis, payload: bytes, queued: int) -> list[Any]:
    """Send a packed MULTI/EXEC on one pooled connection; the EXEC reply (one result per command)."""
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        conn.send_packed_command([payload])
        replies = [conn.read_response() for _ in range(queued + 1)]  # OK for MULTI, QUEUED each
        result = conn.read_response()
    except BaseException:
        conn.disconnect()  # replies may be left unread on the socket: never reuse it
        raise
    finally:
        pool.release(conn)
    bad = [r for r in replies if isinstance(r, Exception)]
    if bad:
        raise bad[0]
    if not isinstance(result, list):
        raise redis.ResponseError(f"EXEC returned {result!r}")
    for r in result:
        if isinstance(r, Exception):
            raise r
    return result


def recorded_errors(client: redis.Redis, marker: str, n: int) -> list[str | None] | None:
    """The reasons recorded by the batch that set `marker`, or None when it has not taken effect."""
    got = client.hgetall(marker)
    if not got or DONE not in got:  # type: ignore[operator]
        return None
    out: list[str | None] = [None] * n
    for k, v in got.items():  # type: ignore[union-attr]
        if k != DONE and k.isdigit() and int(k) < n:
            out[int(k)] = v.decode()
    return out
