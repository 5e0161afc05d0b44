"""The class-data sharing archive of a bounded `cep run` (deployer.spark.run.jvm_archive): the first
run makes it as its JVM exits, the next maps it, and options of the user's own are left alone."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from deployer.spark.run import jvm_archive

ROOT = Path(__file__).resolve().parents[2]
CEP = Path(sys.executable).parent / "cep"
# -Xshare:on: a JVM that cannot map its archives fails to start; the class-loading log says where
# each class came from (a dynamic archive's: "shared objects file (top)")
BASE = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:on -Xlog:class+load=info:file={}/classes-{}.log"


def _run(work: Path, tag: str) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", "CEP_JVM_ARCHIVE")},
        "XDG_CACHE_HOME": str(work / "cache"),
        "CEP_BOUNDED_JVM_OPTIONS": BASE.format(work, "%p"),
        "CEP_DATA_DIR": str(work / "data"),
        "CEP_SHUFFLE_PARTITIONS": "2",
        "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false pyspark-shell",
    }
    args = [
        str(CEP),
        "run",
        str(ROOT / "examples" / "daily_bill.cpl"),
        "--until-idle",
        "--master",
        "local[2]",
    ]
    args += ["--source", f"cdr1=file:{work / 'in' / 'cdr1'}", "--source", f"cdr2=file:{work / 'in' / 'cdr2'}"]
    args += ["--checkpoint", str(work / f"ck-{tag}")]
    done = subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.spark
def test_the_first_bounded_run_makes_the_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    cdr = [sys.executable, str(ROOT / "bench" / "cdr.py")]
    subprocess.run([*cdr, "events", str(tmp_path / "in"), "--events", "40", "--days", "2"], check=True)
    subprocess.run([*cdr, "plans", f"sqlite:///{tmp_path / 'data' / 'crm.sqlite3'}"], check=True)
    first = _run(tmp_path, "1")
    archives = list((tmp_path / "cache" / "paascep" / "jvm").iterdir())
    assert [p.suffix for p in archives] == [".jsa"] and archives[0].stat().st_size > 10_000_000, archives
    assert f"jvm class archive: writing {archives[0]}" in first
    with sqlite3.connect(tmp_path / "data" / "crm.sqlite3") as db:
        bills = db.execute("SELECT * FROM daily_bill ORDER BY idcaller, day").fetchall()
        db.execute("DELETE FROM daily_bill")
        db.execute("DELETE FROM cep_ledger")  # else the second run's batches are written already
    db.close()
    assert bills
    logs = set(tmp_path.glob("classes-*.log"))
    second = _run(tmp_path, "2")
    [loaded] = set(tmp_path.glob("classes-*.log")) - logs
    context = "org.apache.spark.SparkContext source: "
    assert f"{context}shared objects file (top)" in loaded.read_text(), "the second run's JVM did not map it"
    assert "jvm class archive" not in second
    assert list((tmp_path / "cache" / "paascep" / "jvm").iterdir()) == archives
    with sqlite3.connect(tmp_path / "data" / "crm.sqlite3") as db:
        assert db.execute("SELECT * FROM daily_bill ORDER BY idcaller, day").fetchall() == bills
    db.close()


def test_options_of_the_users_own_are_left_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CEP_JVM_ARCHIVE", "1")
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    monkeypatch.delenv("JDK_JAVA_OPTIONS", raising=False)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:SharedArchiveFile=/elsewhere.jsa")
    assert jvm_archive.options("-Xmx1g") == jvm_archive.Archive("-Xmx1g")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "")
    made = jvm_archive.options("-Xmx1g")
    assert (
        made.making is not None and made.path is not None and made.path.parent == tmp_path / "paascep" / "jvm"
    )
    assert made.options == f"-Xmx1g {jvm_archive.MAKE.format(made.making)}"
    made.path.write_bytes(b"archive")
    assert jvm_archive.options("-Xmx1g").options == f"-Xmx1g {jvm_archive.USE.format(made.path)}"
    assert jvm_archive.options("-Xmx2g").making is not None  # other options, another archive
    monkeypatch.setenv("CEP_JVM_ARCHIVE", "0")
    assert jvm_archive.options("-Xmx1g") == jvm_archive.Archive("-Xmx1g")


def test_the_driver_jvms_options_and_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from deployer.spark.run.session import driver_jvm_options

    monkeypatch.setenv("CEP_JVM_ARCHIVE", "0")
    monkeypatch.delenv("CEP_BOUNDED_JVM_OPTIONS", raising=False)
    assert driver_jvm_options(True) == {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    }
    monkeypatch.delenv("CEP_LONG_JVM_OPTIONS", raising=False)
    assert driver_jvm_options(False) == {  # a run that watches its input, `cep serve`
        "spark.driver.extraJavaOptions": "-XX:+IgnoreUnrecognizedVMOptions -XX:TrimNativeHeapInterval=5000"
        " -XX:MaxHeapFreeRatio=40 -XX:MinHeapFreeRatio=10 -XX:G1PeriodicGCInterval=30000"
        " -XX:ReservedCodeCacheSize=100m"
    }
    monkeypatch.setenv("CEP_LONG_JVM_OPTIONS", "none")
    assert driver_jvm_options(False) == {}
    monkeypatch.setenv("CEP_BOUNDED_JVM_OPTIONS", "")  # empty: the default, as for every setting
    assert driver_jvm_options(True) != {}
    monkeypatch.setenv("CEP_BOUNDED_JVM_OPTIONS", "none")  # Spark's own
    assert driver_jvm_options(True) == {}


def test_pyspark_installed_again_where_it_was_gets_an_archive_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A virtualenv made anew at the same path has PySpark's jars of another time, and a JVM refuses,
    silently, an archive made with other jars: every later run started without one (~3 s more a run,
    seen on a clone made again where another had been)."""
    import pyspark

    package = tmp_path / "site-packages" / "pyspark"
    (package / "jars").mkdir(parents=True)
    monkeypatch.setattr(pyspark, "__file__", str(package / "__init__.py"))
    before = jvm_archive.archive_name("-Xmx1g")
    assert before is not None and jvm_archive.archive_name("-Xmx1g") == before  # the same installation
    stat = (package / "jars").stat()
    os.utime(package / "jars", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert jvm_archive.archive_name("-Xmx1g") != before


def _aged(path: Path, hours: float, now: float) -> Path:
    path.write_bytes(b"archive")
    os.utime(path, (now - hours * 3600, now - hours * 3600))
    return path


def _empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, float]:
    """An empty archive cache under `tmp_path`, the archive on and no option of the user's naming
    one; the cache and the time now."""
    import time

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CEP_JVM_ARCHIVE", "1")
    for var in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(var, raising=False)
    cache = jvm_archive.cache_dir()
    cache.mkdir(parents=True)
    return cache, time.time()


def test_the_cache_keeps_the_archives_used_last(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every installation, JDK and set of options has an archive of its own (~180 MB): the cache
    keeps the `KEPT` used last, and drops the others and the files of makers that died."""
    cache, now = _empty_cache(monkeypatch, tmp_path)
    others = [_aged(cache / f"spark-{i:016x}.jsa", 1 + i, now) for i in range(jvm_archive.KEPT + 2)]
    mine = jvm_archive.archive_path("-Xmx1g")
    assert mine is not None
    _aged(mine, 24 * 30, now)  # made a month ago, the oldest of all
    dead = _aged(cache / ".spark-0000000000000000-4242.partial", 25, now)  # a maker that died
    young = _aged(cache / ".spark-0000000000000001-4343.partial", 0.1, now)  # one writing now
    foreign = _aged(cache / "notes.txt", 24 * 90, now)

    assert jvm_archive.options("-Xmx1g").options.endswith(jvm_archive.USE.format(mine))
    assert mine.stat().st_mtime >= now - 5  # mapped now: used last
    dropped = jvm_archive.pruned(cache)
    assert sorted(dropped) == sorted([*others[jvm_archive.KEPT - 1 :], dead])
    assert sorted(cache.iterdir()) == sorted([mine, *others[: jvm_archive.KEPT - 1], young, foreign])


def test_an_archive_put_in_place_prunes_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`finish` puts the archive a JVM wrote in place once the JVM ended (a process that ends when its
    input closes, as the driver's JVM does), then prunes the cache."""
    cache, now = _empty_cache(monkeypatch, tmp_path)
    older = [_aged(cache / f"spark-{i:016x}.jsa", 1 + i, now) for i in range(jvm_archive.KEPT)]
    made = jvm_archive.options("-Xmx1g")
    assert made.making is not None and made.path is not None
    made.making.write_bytes(b"a new archive")
    jvm = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    jvm_archive.finish(made, jvm)
    assert made.path.read_bytes() == b"a new archive" and not made.making.exists()
    assert sorted(cache.iterdir()) == sorted([made.path, *older[: jvm_archive.KEPT - 1]])
