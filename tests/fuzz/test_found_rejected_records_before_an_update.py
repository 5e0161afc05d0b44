"""Found by the differential fuzzer (tests/fuzz): seed 99004 (10-minute soak), minimized by hand.

An UpdateSQL reading a file source whose records do not convert: the reference dead-lettered them,
Spark wrote none. The UpdateSQL's query spools the source's rejected records from its tasks
(deployer/spark/streams/spool.py) and its foreachBatch gathers them; it also cleared the batch's
spool folder as the foreachBatch began, for what an earlier attempt had left. But the UpdateSQL
puts its events in one partition (a shuffle), and Spark ran that shuffle's map stage, the spooling
included, before calling the foreachBatch, whose clearing then removed what it had just spooled.
Fixed: the spool of a query is cleared once, as the query starts (`Spool.clear`). The case as found
also had an AT START trigger as a second sink: it did not matter.
"""

from __future__ import annotations

from typing import Any

import pytest
from fuzz_case import case_from_dict
from fuzz_harness import check_case

pytestmark = [pytest.mark.spark]

SCRIPT = (
    "CREATE DATASTORE db TYPE sqlite;\n"
    "CREATE STREAMSCHEMA s1 WITH k integer, v integer;\n"
    "CREATE SQLQUERY add_to ON db AS 'UPDATE acc SET total = total + ? WHERE k = ?';\n"
    "INSERT INTO w2 SELECT * FROM s1 ON SQL add_to, x, k, k;\n"
)
ACC = {
    "name": "acc",
    "ddl": "CREATE TABLE acc (k bigint PRIMARY KEY, total bigint)",
    "columns": ("k", "total"),
    "rows": ((0, 0), (1, 0), (2, 0), (3, 0)),
}


@pytest.mark.parametrize(
    "files",
    [
        [["{not json"], ['{"k": "abc"}']],  # as found: no event converts
        [["{not json", '{"k": 1, "v": 2}'], ['{"k": "abc"}', '{"k": 3, "v": 4}']],  # beside events
    ],
    ids=["rejected-only", "beside-events"],
)
def test_an_updates_query_writes_its_sources_rejected_records(
    files: list[list[str]], spark: Any, tmp_path: Any
) -> None:
    case = case_from_dict(
        {
            "script": SCRIPT,
            "inputs": {"s1": files},
            "sinks": ["w2"],
            "store": "sqlite",
            "tables": [ACC],
            "compare_tables": ["acc"],
            "max_files": None,
            "ordered": {"w2": []},
            "mtimes": "increasing",
            "partitions": 1,
        }
    )
    ref = check_case(case, spark, None, tmp_path)
    assert [d["stage"] for d in ref.dead] == ["input", "input"], ref.dead  # what Spark must match
