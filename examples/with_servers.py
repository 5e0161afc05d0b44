"""The billing demo of `make demo` against real servers that this script starts and stops itself.

    python examples/with_servers.py DIR      # DIR/in/cdr1, DIR/in/cdr2: events from bench/cdr.py

1. starts a private PostgreSQL and a private Redis on free ports, from the same ladder as the tests
   (tests/servers.py: CEP_TEST_*_URL, testcontainers, the wheels of the `test` extra, the system's);
2. loads the `plans` table into PostgreSQL (bench/cdr.py plans);
3. runs examples/daily_bill.cpl with `--store crm=postgresql://...`: calls priced with `ON SQL`
   against PostgreSQL, daily bills materialized into its `daily_bill` table, which it prints;
4. runs examples/daily_bill_redis.cpl with the same `crm` and `--store cache=redis://...`: the
   daily bills materialized as Redis hashes, which it prints;
5. stops both servers, also when a step fails or on Ctrl-C / SIGTERM.

Each `cep run` uses Spark in local mode (the default engine); `--engine local` after DIR runs the
reference executor instead (no JVM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import ServerHandle, start_postgres, start_redis  # noqa: E402


def step(title: str, args: list[str], **env: str) -> None:
    print(f"\n== {title}\n$ {' '.join(args)}", flush=True)
    subprocess.run(args, cwd=ROOT, env={**os.environ, **env}, check=True, stdin=subprocess.DEVNULL)


def cep_run(script: str, work: Path, name: str, stores: list[str], extra: list[str]) -> None:
    args = [sys.executable, "-m", "deployer.cli", "run", script]
    args += ["--source", f"cdr1=file:{work / 'in' / 'cdr1'}", "--source", f"cdr2=file:{work / 'in' / 'cdr2'}"]
    for store in stores:
        args += ["--store", store]
    args += ["--sink", f"priced=file:{work / 'out' / name}", "--until-idle", *extra]
    step(f"cep run {script}", args, CEP_DATA_DIR=str(work / "data" / name))


def show(url: str, table: str) -> None:
    step(f"{table} in {url.split('://', 1)[0]}", [sys.executable, "examples/show_table.py", url, table])


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `finally` that stops the servers


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    work, extra = Path(sys.argv[1]).resolve(), sys.argv[2:]
    signal.signal(signal.SIGTERM, _terminate)
    started: list[ServerHandle] = []
    try:
        pg = start_postgres()
        started.append(pg)
        print(f"postgres via {pg.how} ({pg.detail}): {pg.url}")
        rd = start_redis()
        started.append(rd)
        print(f"redis via {rd.how} ({rd.detail}): {rd.url}")
        step("plans into PostgreSQL", [sys.executable, "bench/cdr.py", "plans", pg.url])
        crm = f"crm={pg.url}"
        cep_run("examples/daily_bill.cpl", work, "postgres", [crm], extra)
        show(pg.url, "daily_bill")
        cep_run("examples/daily_bill_redis.cpl", work, "redis", [crm, f"cache={rd.url}"], extra)
        show(rd.url, "daily_bill")
    except subprocess.CalledProcessError as exc:
        print(f"\nfailed ({exc.returncode}): {' '.join(map(str, exc.cmd))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        for handle in reversed(started):
            handle.stop()
        if started:
            print("servers stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
