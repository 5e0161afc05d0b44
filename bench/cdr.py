"""Deterministic CDR events (the paper's schema) and a lookup table of plans, of any size.

    python bench/cdr.py events OUT_DIR --streams cdr1,cdr2 --events 100000 --days 3 --seed 7
    python bench/cdr.py plans URL --callers 1000          # sqlite:///path or postgresql://...

Events of each stream are written in event-time order, as JSON lines split into files of
`--per-file` events, named so that name order is time order. The same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def cdrs(n: int, callers: int, days: int, seed: int) -> Iterator[dict[str, object]]:
    """n calls spread evenly over `days` days from 2026-01-01, in time order."""
    rng = random.Random(seed)
    step = days * 86_400_000 / max(n, 1)
    for i in range(n):
        ts = EPOCH + timedelta(milliseconds=int(i * step))
        yield {
            "idcaller": rng.randrange(1, callers + 1),
            "idreceiver": rng.randrange(1, callers + 1),
            # most calls are short; some are free (< 10 s), a few are long
            "duration": int(rng.expovariate(1 / 120)),
            "timestamp": ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        }


def write_events(out: Path, stream: str, n: int, callers: int, days: int, seed: int, per_file: int) -> int:
    directory = out / stream
    directory.mkdir(parents=True, exist_ok=True)
    files = 0
    f = None
    for i, event in enumerate(cdrs(n, callers, days, seed)):
        if i % per_file == 0:
            if f is not None:
                f.close()
            f = (directory / f"{stream}-{files:05d}.jsonl").open("w", encoding="utf-8")
            files += 1
        assert f is not None
        f.write(json.dumps(event) + "\n")
    if f is not None:
        f.close()
    return files


def plans(url: str, callers: int, seed: int = 1) -> int:
    """Create (or replace) `plans(idcaller PK, idplan, fee)` with one plan per caller. The fee is
    money: numeric(6, 2) in PostgreSQL, its exact text in SQLite (whose NUMERIC is a binary double),
    read by the examples as decimal(6, 2)."""
    import sqlalchemy as sa

    sqlite = url.startswith("sqlite:")
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    elif url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    table = sa.Table(
        "plans",
        meta,
        sa.Column("idcaller", sa.Integer, primary_key=True),
        sa.Column("idplan", sa.Integer, nullable=False),
        sa.Column("fee", sa.Text if sqlite else sa.Numeric(6, 2), nullable=False),
    )
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    for c in range(1, callers + 1):
        fee = Decimal(f"{rng.uniform(0.5, 2.0):.2f}")
        rows.append({"idcaller": c, "idplan": 1 + c % 4, "fee": str(fee) if sqlite else fee})
    with engine.begin() as conn:
        meta.drop_all(conn, checkfirst=True)
        meta.create_all(conn)
        conn.execute(table.insert(), rows)
    engine.dispose()
    return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    ev = sub.add_parser("events", help="write CDR streams as JSON lines")
    ev.add_argument("out", type=Path)
    ev.add_argument("--streams", default="cdr1,cdr2")
    ev.add_argument("--events", type=int, default=10_000, help="events per stream")
    ev.add_argument("--callers", type=int, default=1000)
    ev.add_argument("--days", type=int, default=3)
    ev.add_argument("--seed", type=int, default=7)
    ev.add_argument("--per-file", type=int, default=50_000)
    pl = sub.add_parser("plans", help="create the plans lookup table")
    pl.add_argument("url")
    pl.add_argument("--callers", type=int, default=1000)
    args = parser.parse_args()
    if args.cmd == "events":
        for k, stream in enumerate(args.streams.split(",")):
            files = write_events(
                args.out, stream, args.events, args.callers, args.days, args.seed + k, args.per_file
            )
            print(f"{stream}: {args.events} events in {files} file(s) under {args.out / stream}")
    else:
        print(f"plans: {plans(args.url, args.callers)} rows")


if __name__ == "__main__":
    main()
