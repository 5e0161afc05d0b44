"""Print a table of a data store, for the demos: `python examples/show_table.py URL TABLE [LIMIT]`.

URL is a store URL as `cep` takes it: `sqlite:///path`, `postgresql://...` or `redis://...`; in Redis
a table is the hashes under `TABLE:<primary key values>` (stores/redis/store.py).
"""

from __future__ import annotations

import re
import sys

import redis
import sqlalchemy as sa


def show_sql(url: str, table: str, limit: int) -> None:
    if url.startswith(("postgresql://", "postgres://")):  # psycopg 3, the project's driver
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        t = sa.Table(table, sa.MetaData(), autoload_with=conn)
        total = conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
        rows = conn.execute(sa.select(t).order_by(*t.primary_key.columns).limit(limit)).all()
    engine.dispose()
    print(f"{table}: {total} rows (first {len(rows)})")
    print("  ".join(c.name for c in t.columns))
    for r in rows:
        print("  ".join(str(v) for v in r))


def _natural(key: bytes) -> list[int | str]:
    """Sort key: numbers by value, so caller 2 comes before caller 10 (re.split alternates text and
    digits, so items at one index are all of one type)."""
    return [int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", key.decode()))]


def show_redis(url: str, table: str, limit: int) -> None:
    with redis.Redis.from_url(url) as client:
        keys = sorted(client.scan_iter(match=f"{table}:*", count=1000), key=_natural)
        print(f"{table}: {len(keys)} hashes (first {min(limit, len(keys))})")
        for key in keys[:limit]:
            fields = client.hgetall(key)
            shown = "  ".join(f"{f.decode()}={v.decode()}" for f, v in sorted(fields.items()))
            print(f"{key.decode()}  {shown}")


def main() -> None:
    url, table = sys.argv[1], sys.argv[2]
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    if url.startswith(("redis://", "rediss://")):
        show_redis(url, table, limit)
    else:
        show_sql(url, table, limit)


if __name__ == "__main__":
    main()
