"""SQL data stores: PostgreSQL and SQLite."""
