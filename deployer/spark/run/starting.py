"""A streaming query's own session settings: Spark clones the session as a query starts, so what is
set on it then is that query's for its life (its shuffle partitions, whether it runs empty batches),
and Spark hands every setting whose name starts with `spark` to its tasks as a local property, where
deployer.spark.streams.spool.QUERY tells a task which query it runs for."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pyspark.sql.streaming import StreamingQuery

_LOCK = threading.Lock()  # a query takes the session's settings as it starts: one start at a time


def started_with(writer: Any, conf: Any, wanted: Mapping[str, str]) -> StreamingQuery:
    """`writer` (a DataStreamWriter) started with `wanted` set on the session (`conf`, its
    RuntimeConfig), which is then as it was."""
    with _LOCK:
        before = {k: conf.get(k, None) for k in wanted}
        for k, v in wanted.items():
            conf.set(k, v)
        try:
            return writer.start()
        finally:
            for k, v in before.items():
                if v is None:
                    conf.unset(k)
                else:
                    conf.set(k, v)
