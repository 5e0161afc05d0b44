"""The deploy service: catalog, lifecycle, the daemon (`cep serve`), and running the catalog's
migrations (`migrate.py`; the migrations themselves are the top-level `migrations/`)."""
