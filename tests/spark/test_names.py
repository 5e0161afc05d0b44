"""py4j's lookups of the JVM's names, remembered (deployer.spark.run.names): a PySpark function
costs one round trip to the JVM, not three; a static field is still asked for every time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from py4j import clientserver
from pyspark.sql import functions as F

from deployer.spark.run.names import remember_names

pytestmark = pytest.mark.spark


def _round_trips(work: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    original = clientserver.ClientServerConnection.send_command

    def counted(self: Any, command: str) -> Any:
        sent.append(command)
        return original(self, command)

    with monkeypatch.context() as m:
        m.setattr(clientserver.ClientServerConnection, "send_command", counted)
        work()
    return [c for c in sent if not c.startswith("m\n")]  # py4j's own releases of objects aside


def test_a_function_costs_one_round_trip(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    remember_names()
    F.col("warm"), F.lit(0)  # the first calls look their names up
    sent = _round_trips(lambda: F.col("x"), monkeypatch)
    assert len(sent) == 1, sent
    assert len(_round_trips(lambda: F.lit(1), monkeypatch)) == 1
    # and the columns it makes are the ones PySpark makes
    assert spark.range(3).select((F.col("id") * F.lit(2)).alias("d")).collect()[2]["d"] == 4


def test_static_fields_are_asked_for_every_time(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    remember_names()
    integer = spark.sparkContext._jvm.java.lang.Integer
    assert integer.MAX_VALUE == 2**31 - 1
    assert "MAX_VALUE" not in vars(integer)  # a field's value is not kept
    assert len(_round_trips(lambda: integer.MAX_VALUE, monkeypatch)) == 1
    integer.valueOf(6)
    assert len(_round_trips(lambda: integer.valueOf(7), monkeypatch)) == 1  # a method, once looked up
