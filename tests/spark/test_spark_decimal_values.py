"""Decimals on both engines: every operation on random values of narrow and 38-digit types gives
the same value, of the same type, and fails for the same events with the same reasons.

The types are operators.decimals' (those of SQL Server, Hive and Spark); the values are exact and
rounded half up to the result's scale. A 38-digit operand makes Spark cut the result's scale and
round a product to 38 digits and a quotient to 38 places first, which the reference does too; a
result that does not fit its type is a dead letter with the same reason on both engines.
"""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Outputs, assert_same, assert_same_dead_letters, run_both

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA d WITH k integer, a decimal(10, 2), b decimal(6, 3), c decimal(38, 10),
  e decimal(38, 0), f decimal(38, 36), n integer, m bigint, x double, s varchar;
INSERT INTO arith SELECT k, a + b AS ab_add, a - b AS ab_sub, a * b AS ab_mul, a / b AS ab_div,
  a % b AS ab_mod, -a AS a_neg, a + n AS an_add, a * n AS an_mul, a / n AS an_div, a * 100 AS a_lit,
  m * a AS ma, a + x AS ax, a / 3 AS a3, n % a AS na FROM d;
INSERT INTO wide SELECT k, c * c AS cc, c / b AS cb, e + e AS ee, e * f AS ef, c / f AS cf,
  c - f AS c_f, e / n AS en, f * f AS ff, c * b AS cbm FROM d;
INSERT INTO fns SELECT k, abs(a) AS aa, round(a, 1) AS r1, round(c, 5) AS r5, round(a, -1) AS rm,
  round(e, -2) AS re, floor(a) AS fa, ceil(b) AS cb, floor(f) AS ff, mod(a, 7) AS m7, mod(c, b) AS mcb,
  abs(-f) AS af FROM d;
INSERT INTO casts SELECT k, CAST(a AS decimal(9, 1)) AS a91, CAST(x AS decimal(38, 4)) AS x384,
  CAST(a AS integer) AS ai, CAST(a AS double) AS ad, CAST(a AS varchar) AS av,
  CAST(f AS varchar) AS fv, b || '' AS bcat, CAST(n AS decimal(12, 1)) AS n121, CAST(c AS double) AS cd,
  concat(f, '|', e) AS fe FROM d;
INSERT INTO text_casts SELECT k, CAST(s AS decimal(10, 3)) AS s103 FROM d;
INSERT INTO narrowing SELECT k, CAST(c AS bigint) AS cbig, CAST(b AS decimal(3, 1)) AS b31 FROM d;
INSERT INTO cmp SELECT k, a = b AS eq, a < b AS lt, e = f AS ef_eq, e > f AS ef_gt, a = n AS an,
  a > x AS ax, a IN (b, n) AS ain, e IN (f, 0, c) AS ein, a BETWEEN b AND n AS btw,
  f BETWEEN 0 AND e AS fbtw, c NOT IN (e, f) AS cnin FROM d;
INSERT INTO mix SELECT k, CASE WHEN n > 0 THEN a ELSE b END AS cs, coalesce(a, 0) AS c0,
  coalesce(b, n) AS cn, greatest(a, b) AS g, least(a, x) AS l, nullif(a, b) AS nf,
  CASE WHEN n > 0 THEN e ELSE f END AS wide_case, greatest(c, f, e) AS gw FROM d;
"""
SINKS = ["arith", "wide", "fns", "casts", "text_casts", "narrowing", "cmp", "mix"]


def _decimal(rnd: random.Random, p: int, s: int) -> Decimal:
    """A random value of decimal(p, s): any number of its digits, now and then all of them."""
    digits = p if rnd.random() < 0.2 else rnd.randint(1, p)
    unscaled = rnd.randint(0, 10**digits - 1) * rnd.choice([1, -1])
    if rnd.random() < 0.1:
        unscaled = rnd.choice([0, 10**p - 1, -(10**p - 1), 5, -5, 10 ** (p - 1)])
    return Decimal(unscaled).scaleb(-s)


_TEXTS = ["1.2345", " 7 ", "1e3", "abc", "1_0", "99999999999", "-0.0004", "", "+.5", "1.", "NaN", "\t2.5\n"]


def rows(n: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out = []
    for k in range(n):
        row: dict[str, Any] = {
            "k": k,
            "a": _decimal(rnd, 10, 2),
            "b": _decimal(rnd, 6, 3),
            "c": _decimal(rnd, 38, 10),
            "e": _decimal(rnd, 38, 0),
            "f": _decimal(rnd, 38, 36),
            "n": rnd.choice([0, 1, -1, 3, 7, 2**31 - 1, -(2**31), rnd.randint(-1000, 1000)]),
            "m": rnd.choice([0, 2**63 - 1, -(2**63), rnd.randint(-(10**12), 10**12)]),
            "x": rnd.choice([0.1, -2.5, 1e30, 1e-9, 123456.789, float(rnd.randint(-99, 99)) / 7]),
            "s": rnd.choice(_TEXTS),
        }
        # as JSON: decimals as strings and as numbers (both exact: JSON numbers are read as decimals)
        for name in ("a", "b", "c", "e", "f"):
            v = row[name]
            row[name] = str(v) if rnd.random() < 0.5 else float(v) if rnd.random() < 0.1 else v
        if rnd.random() < 0.05:
            row[rnd.choice(["a", "b", "c", "n", "x"])] = None
        out.append(row)
    return out


def _json(rows: list[dict[str, Any]]) -> list[str]:
    # Decimals as JSON numbers written exactly (json.dumps cannot write a Decimal).
    import json

    lines = []
    for r in rows:
        parts = []
        for key, v in r.items():
            text = format(v, "f") if isinstance(v, Decimal) else json.dumps(v)
            parts.append(f"{json.dumps(key)}: {text}")
        lines.append("{" + ", ".join(parts) + "}")
    return lines


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    tmp: Path = tmp_path_factory.mktemp("decimal-values")
    data = _json(rows(400, seed=21))
    return run_both(spark, tmp, SCRIPT, {"d": [data[:200], data[200:]]}, SINKS)


@pytest.mark.parametrize("sink", SINKS)
def test_same_values(both: tuple[Outputs, Outputs], sink: str) -> None:
    assert_same(*both, sink, min_rows=100)


def test_same_dead_letters(both: tuple[Outputs, Outputs]) -> None:
    ref, _ = both
    reasons = {r["reason"].split(":")[0] for r in ref.dead}
    assert {"decimal overflow", "division by zero"} <= reasons, reasons
    assert_same_dead_letters(*both)
