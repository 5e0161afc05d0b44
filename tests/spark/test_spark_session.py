"""The session settings of deployer.spark.deployment: Python workers over a Unix domain socket locally."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from deployer.spark.session import python_worker_conf

pytestmark = pytest.mark.spark


def test_python_workers_talk_over_a_unix_socket_in_local_mode(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.python.unix.domain.socket.enabled") == "true"
    directory = Path(conf.get("spark.python.unix.domain.socket.dir"))
    assert directory.is_dir()
    assert len(str(directory)) + len("/.00000000-0000-0000-0000-000000000000.sock") <= 107

    def doubled(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # pickled by value
        for b in batches:
            yield pa.RecordBatch.from_arrays([pc.multiply(b.column(0), 2)], names=["id"])

    df = spark.range(0, 100, 1, 2)
    assert sorted(r.id for r in df.mapInArrow(doubled, df.schema).collect()) == list(range(0, 200, 2))
    # the socket Spark made for its Python workers is there
    assert any(p.name.endswith(".sock") for p in directory.iterdir())


def test_loopback_tcp_for_a_cluster_when_turned_off_or_when_the_path_is_too_long(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert python_worker_conf("spark://127.0.0.1:7077") == {}
    monkeypatch.setenv("CEP_PYTHON_UDS", "0")
    assert python_worker_conf("local[2]") == {}
    monkeypatch.delenv("CEP_PYTHON_UDS")
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert python_worker_conf("local[*]") == {}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path.parent.parent))  # short enough
    if len(str(tmp_path.parent.parent)) <= 40:
        conf = python_worker_conf("local")
        assert conf["spark.python.unix.domain.socket.enabled"] == "true"
        assert Path(conf["spark.python.unix.domain.socket.dir"]).parent == tmp_path.parent.parent
