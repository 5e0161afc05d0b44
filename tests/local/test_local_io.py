"""deployer.local.driver.run_local with file sources and sinks: conversion, round trip, dead letters."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from cpl.compiler import compile_script
from deployer.connectors.records import RecordError, to_event
from deployer.local.driver import run_local

BILLING = (Path(__file__).parents[2] / "examples" / "billing.cpl").read_text()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def only_file(directory: Path, prefix: str) -> Path:
    [f] = [p for p in directory.iterdir() if p.name.startswith(prefix)]
    return f


def test_file_round_trip_with_a_bad_record(tmp_path: Path) -> None:
    cdr1, cdr2, out = tmp_path / "cdr1", tmp_path / "cdr2", tmp_path / "out"
    cdr1.mkdir()
    cdr2.mkdir()
    (cdr1 / "a.jsonl").write_text(
        '{"idcaller": 1, "idreceiver": 2, "duration": 30, "timestamp": "2026-01-01T08:00:00Z"}\n'
        '{"idcaller": 1, "idreceiver": 2, "duration": "abc", "timestamp": "2026-01-01T09:00:00Z"}\n'
        "\n"
        "{not json\n"
        '{"idcaller": 2, "idreceiver": 2, "duration": 20, "timestamp": 1767261600000}\n'  # 10:00Z
        # a free call (under 10 s) on Jan 2: both streams pass Jan 1's end, so its window closes
        '{"idcaller": 2, "idreceiver": 2, "duration": 5, "timestamp": "2026-01-02T00:00:00Z"}\n'
    )
    (cdr1 / "_ignored.jsonl").write_text("garbage\n")
    (cdr1 / ".hidden.jsonl").write_text("garbage\n")
    (cdr2 / "b.csv").write_text(
        "idcaller,idreceiver,duration,timestamp\n"
        "1,5,12,2026-01-01 11:00:00\n"  # naive: UTC
        "3,5,15\n"  # wrong column count
        "2,5,10,2026-01-02T00:00:00+00:00\n"
    )
    stats = run_local(
        compile_script(BILLING).graph,
        sources={"cdr1": f"file:{cdr1}", "cdr2": f"file:{cdr2}"},
        sinks={"bill": f"file:{out}", "costs": f"file:{out}"},
        until_idle=True,
    )
    # Jan 1: caller 1 = 310 + 130, caller 2 = 210; Jan 2 never completes (input ends at its start).
    assert lines(only_file(out, "bill-")) == [{"idcaller": 1, "total": 440}, {"idcaller": 2, "total": 210}]
    assert lines(only_file(out, "costs-"))[0] == {
        "idcaller": 1,
        "cost": 310,
        "timestamp": "2026-01-01T08:00:00Z",
    }
    dead = lines(only_file(tmp_path / "dead-letter", "dead-letter-"))
    assert [(d["stage"], d["reason"], d["source"]) for d in dead] == [
        ("input", "field 'duration': 'abc' is not an integer", f"{cdr1 / 'a.jsonl'}:2"),
        (
            "input",
            "malformed JSON: Expecting property name enclosed in double quotes at column 2",
            f"{cdr1 / 'a.jsonl'}:4",
        ),
        ("input", "expected 4 CSV columns, got 3", f"{cdr2 / 'b.csv'}:3"),
    ]
    assert dead[0]["record"].startswith('{"idcaller": 1, "idreceiver": 2, "duration": "abc"')
    assert dead[0]["stream"] == "cdr1"
    assert stats.events_in == {"cdr1": 3, "cdr2": 2}
    assert stats.dead_lettered == {"input": 3}
    assert stats.events_out["bill"] == 2


def test_console_sink_and_missing_source_is_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "1.json").write_text(
        json.dumps(
            [
                {"idcaller": 7, "idreceiver": 1, "duration": 10, "timestamp": "2026-01-01T01:00:00Z"},
                {"idcaller": 7, "idreceiver": 1, "duration": 11, "timestamp": "2026-01-02T01:00:00Z"},
            ]
        )
    )
    stats = run_local(
        compile_script(BILLING).graph,
        sources={"cdr1": f"file:{src}"},  # cdr2 has no input: it ends at once
        sinks={"bill": "console"},
        dead_letter=f"file:{tmp_path / 'dl'}",
        until_idle=True,
    )
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == [{"idcaller": 7, "total": 110}]
    assert stats.total_dead_lettered == 0
    assert not (tmp_path / "dl").exists()  # created only when something is dead-lettered


def test_watching_picks_up_new_files_until_stopped(tmp_path: Path) -> None:
    script = """
    CREATE STREAMSCHEMA s WITH id integer, name varchar(5);
    INSERT INTO o SELECT id, upper(name) AS name FROM s;
    """
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    (src / "1.jsonl").write_text('{"id": 1, "name": "ab"}\n')
    stop = threading.Event()
    result: dict = {}

    def go() -> None:
        result["stats"] = run_local(
            compile_script(script).graph,
            {"s": f"file:{src}"},
            {"o": f"file:{out}"},
            until_idle=False,
            poll_interval=0.01,
            stop=stop,
        )

    t = threading.Thread(target=go)
    t.start()
    try:
        for _ in range(500):
            if out.exists() and any(out.iterdir()) and only_file(out, "o-").read_text():
                break
            threading.Event().wait(0.01)
        # Files must appear whole: write under an ignored name, then rename (atomic).
        (src / ".2.jsonl").write_text('{"id": 2, "name": "toolong"}\n{"id": 3, "name": "c"}\n')
        (src / ".2.jsonl").rename(src / "2.jsonl")
        for _ in range(500):
            if len(only_file(out, "o-").read_text().splitlines()) == 2:
                break
            threading.Event().wait(0.01)
    finally:
        stop.set()
        t.join(10)
    assert lines(only_file(out, "o-")) == [{"id": 1, "name": "AB"}, {"id": 3, "name": "C"}]
    assert result["stats"].dead_lettered == {"input": 1}


SCHEMA = compile_script(
    "CREATE STREAMSCHEMA s WITH i integer, l bigint, x double, d decimal(6, 2), b boolean, v varchar(3), t timestamp;"
    "INSERT INTO o SELECT i + 1 AS j FROM s;"
).graph.stream_schema("s")


def test_record_conversion() -> None:
    ev = to_event(
        {
            "I": "5",
            "l": 2**40,
            "x": Decimal("1.5"),
            "d": "2.345",
            "b": "true",
            "v": 12,
            "t": "2026-01-01T00:00:00",
        },
        SCHEMA,
    )
    assert ev == (5, 2**40, 1.5, Decimal("2.35"), True, "12", datetime(2026, 1, 1, tzinfo=UTC))
    assert to_event(dict.fromkeys("ilxdbvt"), SCHEMA) == (None,) * 7


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("i", "abc", "field 'i': 'abc' is not an integer"),
        ("i", 1.5, "field 'i': 1.5 is not an integer"),
        ("i", 2**31, "field 'i': 2147483648 is out of range for integer"),
        ("x", "n/a", "field 'x': 'n/a' is not a number"),
        ("d", "1e9", "field 'd': 1000000000 is out of range for decimal(6, 2)"),
        ("b", "maybe", "field 'b': 'maybe' is not a boolean"),
        ("v", "abcd", "field 'v': 'abcd' is longer than 3 characters"),
        ("t", "yesterday", "field 't': 'yesterday' is not a timestamp (ISO 8601 text or epoch milliseconds)"),
        ("t", None, None),
    ],
)
def test_record_conversion_errors(field: str, value: object, reason: str | None) -> None:
    rec = {"i": 1, "l": 1, "x": 1, "d": 1, "b": True, "v": "a", "t": 0}
    rec[field] = value
    if reason is None:
        to_event(rec, SCHEMA)
        return
    with pytest.raises(RecordError) as err:
        to_event(rec, SCHEMA)
    assert str(err.value) == reason


def test_missing_field() -> None:
    with pytest.raises(RecordError, match="missing field 't'"):
        to_event({"i": 1, "l": 1, "x": 1, "d": 1, "b": True, "v": "a"}, SCHEMA)


def test_stdin_source_csv_empty_cells_and_default_dead_letter_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    script = """
    CREATE STREAMSCHEMA s WITH id integer, name varchar;
    CREATE STREAMSCHEMA c WITH id integer, name varchar;
    INSERT INTO o SELECT id, name FROM s WHERE id > 0;
    INSERT INTO p SELECT id, name FROM c WHERE id IS NULL OR id > 0;
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO('{"id": 1, "name": "a"}\n{"id": "x", "name": "b"}\n'))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "1.csv").write_text("name,id\n,\nz,2\n")
    stats = run_local(
        compile_script(script).graph,
        {"s": "-", "c": f"file:{tmp_path / 'c'}"},
        {"o": "console", "p": "console"},
        until_idle=True,
    )
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    # two streams share the console: each line names its stream
    assert sorted(out, key=str) == sorted(
        [
            {"$stream": "o", "id": 1, "name": "a"},
            {"$stream": "p", "id": None, "name": ""},  # empty CSV cells: NULL, '' for text
            {"$stream": "p", "id": 2, "name": "z"},
        ],
        key=str,
    )
    [dead] = lines(only_file(tmp_path / "dead-letter", "dead-letter-"))
    assert dead["reason"] == "field 'id': 'x' is not an integer"
    assert dead["source"] == "<stdin>:2"
    assert stats.dead_lettered == {"input": 1}
