"""Checkpoint files without a `chmod` process each (deployer/spark/hadoop): the class Spark's JVM
takes for `file:` paths with a local master, the permissions it gives, the same as Hadoop's own, and
a whole `cep run` of a stateful script on a machine where `chmod` cannot be run."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import at, write_files

from deployer.spark import functions, hadoop
from deployer.spark.run import class_path

CEP = Path(sys.executable).parent / "cep"


def test_the_jar_is_built_from_its_source() -> None:
    """The committed jar was rebuilt after its source last changed (`make jars`)."""
    assert hadoop.built_from() == hadoop.source_digest()


def test_only_a_local_master_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CEP_NIO_LOCAL_FS", raising=False)
    assert hadoop.conf("local[2]") == {"spark.hadoop.fs.file.impl": hadoop.CLASS}
    assert hadoop.class_path("local[2]") == [hadoop.JAR]
    assert class_path.conf("local[2]")["spark.driver.extraClassPath"] == f"{hadoop.JAR}:{functions.JAR}"
    assert hadoop.conf("spark://somewhere:7077") == {}  # its executors run where the jar is not
    assert class_path.conf("spark://somewhere:7077") == {"spark.driver.extraClassPath": str(functions.JAR)}
    assert hadoop.class_path_key("local[2]") != hadoop.class_path_key("spark://somewhere:7077") == ""
    monkeypatch.setenv("CEP_NIO_LOCAL_FS", "0")
    assert hadoop.conf("local[2]") == {} and hadoop.class_path("local[2]") == []


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in sorted(root.rglob("*"))}


@pytest.mark.spark
def test_it_gives_the_permissions_hadoops_own_gives(spark: Any, tmp_path: Path) -> None:
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    fs_ = jvm.org.apache.hadoop.fs
    ours = fs_.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    assert ours.getClass().getName() == hadoop.CLASS  # the tests' session is made as `cep run`'s
    theirs = fs_.LocalFileSystem()
    theirs.initialize(jvm.java.net.URI("file:///"), conf)
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission

    def write(fs: Any, root: Path) -> dict[str, int]:
        out = fs.create(fs_.Path(str(root / "a" / "b" / "f")), True)  # makes a/ and a/b/ too
        out.write(b"x")
        out.close()
        fs.mkdirs(fs_.Path(str(root / "d")), permission(0o750))
        fs.setPermission(fs_.Path(str(root / "a" / "b" / "f")), permission(0o604))
        fs.setPermission(fs_.Path(str(root / "d")), permission(0o1751))  # sticky: Hadoop's own way
        return _modes(root)

    made = write(ours, tmp_path / "ours")
    assert made == write(theirs, tmp_path / "theirs")
    assert made == {
        "a": 0o755,
        "a/b": 0o755,
        "a/b/.f.crc": 0o604,  # a checksum takes its file's permission
        "a/b/f": 0o604,
        "d": 0o1751,
    }


def _path_without(tmp: Path, *names: str) -> str:
    """A PATH with every program of this one but `names` (links in one directory)."""
    bin_ = tmp / "bin"
    bin_.mkdir()
    for directory in reversed(os.environ.get("PATH", "").split(os.pathsep)):
        if not directory or not Path(directory).is_dir():
            continue
        for program in Path(directory).iterdir():
            if program.name not in names and os.access(program, os.X_OK) and not program.is_dir():
                link = bin_ / program.name
                link.unlink(missing_ok=True)  # the first directory of PATH wins, as it would
                link.symlink_to(program.resolve())
    assert shutil.which("chmod", path=str(bin_)) is None
    return str(bin_)


def _cep_run(tmp: Path, script: Path, sink: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`cep run --until-idle` of `script` (stream `s` from tmp/in, `sink` into tmp/out) in a process
    of its own, with the setting at its default and `env` added; asserts that it succeeded."""
    environ = {**os.environ, "CEP_DATA_DIR": str(tmp / "data"), **env}
    environ.pop("CEP_NIO_LOCAL_FS", None)
    args = [str(CEP), "run", str(script), "--until-idle", "--master", "local[2]"]
    args += ["--source", f"s=file:{tmp / 'in'}", "--sink", f"{sink}=file:{tmp / 'out'}"]
    args += ["--checkpoint", str(tmp / "ck")]
    done = subprocess.run(
        args, env=environ, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def _written(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in out.glob("*.jsonl") for line in f.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.spark
def test_a_stateful_run_forks_no_chmod(tmp_path: Path) -> None:
    """Without `chmod` on its PATH, Hadoop's own local file system fails the first checkpoint file
    it writes ("Cannot run program "chmod""); with the class, a run that writes offsets, commits and
    a window's state store files completes with its rows."""
    script = tmp_path / "w.cpl"
    script.write_text(
        "CREATE STREAMSCHEMA s WITH k integer, v integer, ts timestamp TIMESTAMP BY ts;\n"
        "INSERT INTO totals SELECT k, sum(v) AS total FROM s WINDOW TIME SIZE 1 MINUTE GROUP BY k;\n"
    )
    events = [{"k": i % 2, "v": i, "ts": at(20 * i)} for i in range(12)]  # 4 minutes, 3 of them closed
    write_files(tmp_path / "in", [events[:6], events[6:]])
    _cep_run(tmp_path, script, "totals", PATH=_path_without(tmp_path, "chmod"), CEP_SHUFFLE_PARTITIONS="2")
    rows = sorted((r["k"], r["total"]) for r in _written(tmp_path / "out"))
    # minutes [0, 60 s), [60, 120 s), [120, 180 s): events 0-2, 3-5, 6-8; the last minute stays open
    assert rows == [(0, 0 + 2), (0, 4), (0, 6 + 8), (1, 1), (1, 7), (1, 3 + 5)]
    states = list((tmp_path / "ck").rglob("*.changelog")) + list((tmp_path / "ck").rglob("*.zip"))
    assert states, "the window wrote no state store file: the run proved nothing"


@pytest.mark.slow
@pytest.mark.spark
def test_a_driver_class_path_of_the_users_own_keeps_hadoops_class(tmp_path: Path) -> None:
    """`--driver-class-path` replaces the class path that would hold the jar: the run says so and
    writes its checkpoint with Hadoop's own class, where naming a class the JVM cannot load would
    fail every `file:` path."""
    script = tmp_path / "s.cpl"
    script.write_text("CREATE STREAMSCHEMA s WITH k integer;\nINSERT INTO out SELECT k FROM s WHERE k > 0;\n")
    write_files(tmp_path / "in", [[{"k": k} for k in range(4)]])
    submit = f"--driver-class-path {tmp_path / 'none.jar'} pyspark-shell"
    done = _cep_run(tmp_path, script, "out", PYSPARK_SUBMIT_ARGS=submit)
    assert f"{hadoop.CLASS} is not on the JVM's class path" in done.stderr
    assert sorted(r["k"] for r in _written(tmp_path / "out")) == [1, 2, 3]
