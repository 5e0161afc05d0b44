"""Found by an outside differential test (issue 38): a Union one of whose inputs delivers no event
(an empty file; or only a malformed record), into a TIME window. The reference fires the windows as
far as the other input's watermark goes, as docs/language.md says ("at the end of the input, an
input that had no events does not hold the merge's watermark back"); Spark fired none: its
watermark is the least of its streams', and a stream that never saw a row counts as 0. Fixed in
deployer/spark/streams/merge_sequencer.py: such a stream releases a placeholder row at the end, which puts
its watermark at the merge's and is dropped before any operator sees it (deployer/spark/streams/sources.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_case import Case
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

SCRIPT = (
    "CREATE STREAMSCHEMA sa WITH k integer, v integer, ts timestamp TIMESTAMP BY ts{wa};\n"
    "CREATE STREAMSCHEMA sb WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "INSERT INTO u SELECT * FROM sa, sb;\n"
    "INSERT INTO o SELECT k, count(*) AS n, window_end() AS we FROM u WINDOW TIME SIZE 2 SECONDS "
    "GROUP BY k HAVING count(*) > 0;\n"
)
EVENTS = [json.dumps({"k": i % 3, "v": i, "ts": f"2026-03-01T00:00:{i:02d}Z"}) for i in range(20)]


def _case(empty: list[list[str]], watermark: str, max_files: int | None) -> Case:
    return Case(
        script=SCRIPT.format(wa=watermark),
        inputs={"sa": empty, "sb": [EVENTS[:7], EVENTS[7:15], EVENTS[15:]]},
        sinks=["o", "u"],
        ordered={"o": ["k"], "u": []},
        max_files=max_files,
        partitions=1,
    )


@pytest.mark.parametrize(
    "case",
    [
        _case([[]], "", None),
        _case([["{not json"]], " WATERMARK 3 SECONDS", 1),
    ],
    ids=["empty-file", "only-a-malformed-record"],
)
def test_engines_agree(case: Case, spark: Any, tmp_path: Any) -> None:
    check_case(case, spark, None, tmp_path)
