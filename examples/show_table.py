"""Print a table of a data store, for the demo: `python examples/show_table.py URL TABLE [LIMIT]`."""

from __future__ import annotations

import sys

import sqlalchemy as sa

url, table = sys.argv[1], sys.argv[2]
limit = int(sys.argv[3]) if len(sys.argv) > 3 else 10
engine = sa.create_engine(url)
with engine.connect() as conn:
    t = sa.Table(table, sa.MetaData(), autoload_with=conn)
    total = conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
    rows = conn.execute(sa.select(t).order_by(*t.primary_key.columns).limit(limit)).all()
print(f"{table}: {total} rows (first {len(rows)})")
print("  ".join(c.name for c in t.columns))
for r in rows:
    print("  ".join(str(v) for v in r))
