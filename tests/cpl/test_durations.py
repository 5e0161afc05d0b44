"""Durations: positive everywhere, except a WATERMARK, whose default 0 may be written out."""

from __future__ import annotations

import pytest

from cpl.compiler import compile_script
from cpl.errors import CompileError

STREAM = "CREATE STREAMSCHEMA s WITH k integer, ts timestamp TIMESTAMP BY ts"


@pytest.mark.parametrize("written", ["WATERMARK 0 SECONDS", "WATERMARK 0 ms", "WATERMARK 0 MINUTES", ""])
def test_a_watermark_of_zero_is_the_default_written_out(written: str) -> None:
    graph = compile_script(f"{STREAM} {written};\nINSERT INTO o SELECT * FROM s;\n").graph
    (source,) = graph.sources()
    assert source.watermark_ms == 0


def test_a_positive_watermark_is_kept() -> None:
    graph = compile_script(f"{STREAM} WATERMARK 2 SECONDS;\nINSERT INTO o SELECT * FROM s;\n").graph
    assert graph.sources()[0].watermark_ms == 2000


@pytest.mark.parametrize(
    "window", ["TIME SIZE 0 SECONDS", "TIME SIZE 2 SECONDS ADVANCE 0 ms", "TIME SIZE 0 DAYS ADVANCE 0 DAYS"]
)
def test_a_window_duration_of_zero_is_an_error_at_its_place(window: str) -> None:
    script = f"{STREAM};\nINSERT INTO o SELECT count(*) AS n FROM s WINDOW {window};\n"
    with pytest.raises(CompileError) as info:
        compile_script(script, "w.cpl")
    text = info.value.render()
    assert "a duration must be positive" in text
    column = script.splitlines()[1].index(" 0 ") + 2  # 1-based column of the zero
    assert f"w.cpl:2:{column}: error" in text
    assert "or 0" not in text
