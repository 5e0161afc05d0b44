"""The exactly-once Redis stream sink on Spark: one MULTI/EXEC per micro-batch, marked by batch id.

What it does and why is engine-neutral, with the local engine's writer: deployer.connectors.redis_stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from pyspark import SparkContext

from deployer.connectors.records import event_json
from deployer.connectors.redis_stream import (
    DATA,
    WATCH_RETRIES,
    RedisStreamError,
    marker_key,
    parse_stream_uri,
)
from deployer.spark.streams.driver_rows import DriverSink, Rows


def redis_stream_writer(
    uri: str, stream_name: str, names: tuple[str, ...], order: Sequence[str] = ()
) -> DriverSink:
    """The batch's rows, sorted by `order`, as entries `data` = JSON line, each batch exactly once
    (deployer.connectors.redis_stream). It returns the entries it added: none for a replay."""
    target = parse_stream_uri(uri)
    holder: list[redis.Redis] = []

    def emit(rows: Rows, batch_id: int) -> int:
        if not holder:
            holder.append(target.client())
        client = holder[0]
        # foreachBatch runs on the query's thread, which holds its id (none outside a query)
        query = SparkContext.getOrCreate().getLocalProperty("sql.streaming.queryId")
        writer = f"{stream_name}@{query}" if query else stream_name
        marker = marker_key(target.key)
        # The rows were collected even for a replay that writes nothing: Spark (4.3) fails a batch
        # whose stateful operators did not run and commit their state.
        lines = [event_json(names, values) for values in rows]
        try:
            # WATCH: any writer of this stream recording a batch meanwhile (the hash is shared) aborts
            # EXEC; then look again, the other one may have been a zombie run of this very batch.
            for _ in range(WATCH_RETRIES):
                with client.pipeline(transaction=True) as p:
                    p.watch(marker)
                    done: Any = p.hget(marker, writer)
                    if done is not None and int(done) >= batch_id:
                        return 0  # a replay: this batch already took effect
                    p.multi()
                    for line in lines:
                        p.xadd(target.key, {DATA: line})
                    p.hset(marker, writer, str(batch_id))
                    try:
                        p.execute()
                        return len(lines)
                    except redis.WatchError:
                        continue
        except redis.RedisError as e:
            raise target.error(e, f"writing batch {batch_id} of '{stream_name}'") from None
        raise RedisStreamError(
            f"{target}: batch {batch_id} of '{stream_name}' not written: the marker {marker} kept "
            f"changing during {WATCH_RETRIES} attempts"
        )

    return DriverSink(len(names), tuple(order), emit)
