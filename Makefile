# Developer entry points. `make test` is the command CI runs (via .ci/run).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv

.PHONY: venv test lint fmt demo

venv: $(VENV)/.installed

# The stamp makes re-runs free until pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --upgrade pip
	$(VENV)/bin/python -m pip install -e '.[test,dev]'
	touch $@

# pytest's own exit code is saved for .ci/run, because make itself only ever exits with 2.
test: venv
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS); rc=$$?; echo $$rc > $(VENV)/.pytest-rc; exit $$rc

lint: venv
	$(VENV)/bin/ruff check . && $(VENV)/bin/mypy

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --select I --fix .

demo: venv  # filled in by the compiler/executor work
	$(VENV)/bin/cep --help
