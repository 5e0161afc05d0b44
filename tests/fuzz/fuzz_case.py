"""One generated case of the differential fuzzer: a CPL script, its input files, the data store it
reads and writes, and how Spark cuts the input into micro-batches. Plain data, so that a case can
be printed, compared and written out as a regression test (`regression_source`).
"""

from __future__ import annotations

import hashlib
import pprint
import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class StoreTable:
    """A table of the case's data store, created and filled before each engine's run."""

    name: str
    ddl: str  # CREATE TABLE, valid on SQLite and PostgreSQL
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...] = ()


@dataclass(frozen=True)
class Case:
    script: str
    # stream -> files -> lines (JSON text; a malformed line is kept as it is)
    inputs: dict[str, list[list[str]]]
    sinks: list[str]
    store: str | None = None  # "sqlite" | "postgresql": the kind behind the script's `db` data store
    tables: list[StoreTable] = field(default_factory=list)
    # tables read back after the run and compared: those the script writes
    compare_tables: list[str] = field(default_factory=list)
    max_files: int | None = None  # Spark: files per micro-batch (None: all at once)
    # sink -> the fields whose values make a group within which the output order is defined
    # ([] : the whole stream is ordered); a sink not listed is compared as a multiset only
    ordered: dict[str, list[str]] = field(default_factory=dict)
    # the input files' modification times: "increasing", "equal" or "reversed" (name order rules)
    mtimes: str = "increasing"
    partitions: int = 2  # Spark: state partitions of the stateful queries (CEP_SHUFFLE_PARTITIONS)
    # CEP_TRIGGER_CLOCK for both engines' runs (START/NOW): the ticks of the script's triggers are
    # exactly those in [START, NOW]; None for a script without one (the environment's then rules)
    trigger_clock: str | None = None

    @property
    def digest(self) -> str:
        return hashlib.sha256(repr(asdict(self)).encode()).hexdigest()[:10]

    def describe(self) -> str:
        """The case as a reader wants it in a failure message."""
        lines = [self.script.rstrip(), ""]
        for stream, files in self.inputs.items():
            for i, f in enumerate(files):
                lines.append(f"-- {stream} file {i}:")
                lines.extend(f"   {line}" for line in f)
        if self.store:
            lines.append(f"-- store db: {self.store}; tables: {[t.name for t in self.tables]}")
            for t in self.tables:
                lines.append(f"   {t.ddl}; rows {list(t.rows)}")
        if self.trigger_clock:
            lines.append(f"-- triggers tick on CEP_TRIGGER_CLOCK={self.trigger_clock}")
        lines.append(
            f"-- spark: max files per trigger {self.max_files}, {self.partitions} state partition(s); "
            f"file modification times {self.mtimes}"
        )
        return "\n".join(lines)


def regression_source(case: Case, found: str) -> str:
    """A pytest module that runs `case` on both engines and asserts they agree: written by the
    fuzzer when it finds a divergence, ready to commit under tests/fuzz/ once the cause is fixed."""
    body = textwrap.indent(pprint.pformat(asdict(case), width=100, sort_dicts=False), "    ")
    pg = case.store == "postgresql"  # only then does the test need a PostgreSQL server
    return "\n".join(
        [
            f'"""Found by the differential fuzzer (tests/fuzz): {_docstring(found).rstrip()}',
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from typing import Any",
            "",
            "import pytest",
            "from fuzz_case import case_from_dict",
            "from fuzz_harness import check_case",
            "",
            f"pytestmark = [pytest.mark.spark{', pytest.mark.postgres' if pg else ''}]",
            "",
            "CASE = case_from_dict(",
            body,
            ")",
            "",
            "",
            f"def test_engines_agree_{case.digest}(spark: Any, {'postgres_url: str, ' if pg else ''}tmp_path: Any) -> None:",
            f"    check_case(CASE, spark, {'postgres_url' if pg else 'None'}, tmp_path)",
            "",
        ]
    )


def _docstring(text: str) -> str:
    """`text` made safe inside a triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', "'''")


def case_from_dict(d: dict[str, Any]) -> Case:
    tables = [
        StoreTable(t["name"], t["ddl"], tuple(t["columns"]), tuple(tuple(r) for r in t["rows"]))
        for t in d.get("tables", [])
    ]
    return Case(**{**d, "tables": tables})
