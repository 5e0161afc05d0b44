"""The ledger's table in SQL stores (stores/ledger.py), as SQLAlchemy creates it on first use.

Apart from stores/ledger.py so that the engine's side of the ledger (keys, scopes) imports no
SQLAlchemy: a script without a SQL store never loads it.
"""

from __future__ import annotations

import sqlalchemy as sa

from stores.ledger import MAX_KEY, MAX_NAME, TABLE

_metadata = sa.MetaData()
LEDGER = sa.Table(
    TABLE,
    _metadata,
    sa.Column("deployment", sa.String(MAX_NAME), nullable=False),
    sa.Column("operator", sa.String(MAX_NAME), nullable=False),
    sa.Column("key", sa.String(MAX_KEY + 8), nullable=False),
    sa.Column("affected", sa.BigInteger, nullable=True),  # UpdateSQL: the event's affected-row count
    sa.Column("error", sa.Text, nullable=True),  # why the event failed; Materialize: JSON {row: reason}
    sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.func.current_timestamp(), nullable=False
    ),
    sa.PrimaryKeyConstraint("deployment", "operator", "key", name="cep_ledger_pkey"),
)
