"""The catalog's Alembic project: `env.py`, `script.py.mako` and the revisions in `versions/`.

From a checkout, `alembic.ini` (at the root) points here: `alembic upgrade head`, `alembic history`,
`alembic current`, `alembic upgrade head --sql`. `cep db upgrade` runs the same revisions, from a
checkout or from a wheel, through deployer/service/migrate.py.

Nothing imports this package: Alembic loads `env.py` and the revisions by path. It is a package so
that the tools of the checkout (mypy, the import contracts of pyproject.toml) see it as `migrations`;
the wheel ships this folder as `paascep_migrations` (setup.py), a name no other distribution is
likely to have, where a top-level `migrations` would clash with the many that ship one
(docs/architecture.md, "The catalog's migrations").
"""
