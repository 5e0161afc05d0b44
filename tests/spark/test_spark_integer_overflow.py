"""Where Spark wraps around, clamps or fails the batch, the reference raises an error for the event:
both engines dead-letter the same events with the same reasons (docs/language.md, "Engines").

Spark's abs of the least integer is itself, its round of an integer wraps around, its floor and
ceil of a huge double clamp to the bigint range, its timestamp_millis fails the batch beyond its
range, and its substring computes start + length in 32 bits: each used to give another value than
the reference, or stop the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Outputs, assert_same, assert_same_dead_letters, run_both

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA e WITH k integer, i integer, b bigint, x double, ms bigint, len integer, s varchar;
INSERT INTO absolute SELECT k, abs(i) AS ai, abs(b) AS ab, -i AS ni FROM e;
INSERT INTO rounded SELECT k, round(i, -1) AS ri, round(b, -2) AS rb, round(i, 2) AS r2 FROM e;
INSERT INTO integral SELECT k, floor(x) AS fx, ceil(x) AS cx FROM e;
INSERT INTO times SELECT k, from_epoch_millis(ms) AS t FROM e;
INSERT INTO cut SELECT k, substring(s, i, len) AS part FROM e;
INSERT INTO text_int SELECT k, CAST(s AS integer) AS si FROM e;
INSERT INTO double_bigint SELECT k, CAST(x AS bigint) AS xb FROM e;
INSERT INTO bigint_int SELECT k, CAST(b AS integer) AS bi FROM e;
"""
SINKS = ["absolute", "rounded", "integral", "times", "cut", "text_int", "double_bigint", "bigint_int"]
I_MIN, I_MAX, B_MIN, B_MAX = -(2**31), 2**31 - 1, -(2**63), 2**63 - 1


def rows() -> list[dict[str, Any]]:
    ints = [I_MIN, I_MAX, -7, 0, 2, 15, I_MAX - 3, I_MIN + 4]
    bigs = [B_MAX, B_MIN, -123456, 0, B_MAX - 40, 99, B_MIN + 49, 2**40, 12]
    doubles = [1e30, -1e30, 9.3e18, -9.3e18, 2.0**63, -(2.0**63), 1.5, -2.5, 9.2e18, -9.2e18]
    millis = [253402300799999, 253402300800000, -62135596800000, -62135596800001, 2**62, -(2**62), 0]
    lengths = [I_MAX, 3, 0, I_MAX - 1, 1]
    texts = ["hello world", "2147483648", "-2147483649", " 42 ", "99999999999", "7", "-12", "2147483647"]
    out = []
    for k in range(60):
        out.append(
            {
                "k": k,
                "i": ints[k % len(ints)],
                "b": bigs[k % len(bigs)],
                "x": doubles[k % len(doubles)],
                "ms": millis[k % len(millis)],
                "len": lengths[k % len(lengths)],
                "s": texts[k % len(texts)],
            }
        )
    return out


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outputs, Outputs]:
    tmp: Path = tmp_path_factory.mktemp("integer-overflow")
    data = rows()
    return run_both(spark, tmp, SCRIPT, {"e": [data[:30], data[30:]]}, SINKS)


@pytest.mark.parametrize("sink", SINKS)
def test_same_values(both: tuple[Outputs, Outputs], sink: str) -> None:
    assert_same(*both, sink, min_rows=5, ordered=True)


def test_same_dead_letters(both: tuple[Outputs, Outputs]) -> None:
    ref, _ = both
    reasons = " | ".join(sorted({r["reason"] for r in ref.dead}))
    for expected in (
        "integer overflow: 2147483648 is out of range for integer",  # abs and unary minus
        "integer overflow: 9223372036854775808 is out of range for bigint",
        "integer overflow: 2147483650 is out of range for integer",  # round(2147483647, -1)
        "integer overflow: floor(1e+30) is out of range for bigint",
        "integer overflow: floor(9.223372036854776e+18) is out of range for bigint",  # 2^63
        "cannot cast 9.223372036854776e+18 to bigint: out of range",
        "from_epoch_millis(253402300800000) is out of the timestamp range",
    ):
        assert expected in reasons, reasons
    assert_same_dead_letters(*both)
