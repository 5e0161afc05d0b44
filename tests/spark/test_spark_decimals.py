"""Decimal arithmetic gives the same values on both engines: the type checker types a product
with scale s1 + s2, a quotient with at least 6 places and round(decimal, d) with d places, which
is what the reference evaluator computes and what Spark then computes in the declared type.
(These were strict xfails until the type checker and the evaluator agreed.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Outputs, assert_same, run_both

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA d WITH k integer, p decimal(10, 2), q decimal(6, 3), n integer;
INSERT INTO product SELECT k, p * q AS pq FROM d;
INSERT INTO quotient SELECT k, p / n AS pn FROM d;
INSERT INTO rounded SELECT k, round(p, 1) AS r1 FROM d;
INSERT INTO exact SELECT k, p * 2 AS p2, p + q AS s, p - q AS m, -p AS neg FROM d;
"""
ROWS = [
    {"k": 1, "p": "12.34", "q": "1.234", "n": 3},
    {"k": 2, "p": "-0.05", "q": "0.333", "n": 7},
    {"k": 3, "p": "100.00", "q": "3.000", "n": 1},
]


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    tmp: Path = tmp_path_factory.mktemp("decimals")
    return run_both(spark, tmp, SCRIPT, {"d": [ROWS]}, ["product", "quotient", "rounded", "exact"])


def test_decimal_arithmetic_that_keeps_the_declared_scale(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "exact", min_rows=3, ordered=True)


def test_decimal_product(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "product", min_rows=3, ordered=True)


def test_decimal_quotient(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "quotient", min_rows=3, ordered=True)


def test_decimal_round(both: tuple[Outputs, Outputs]) -> None:
    assert_same(*both, "rounded", min_rows=3, ordered=True)
