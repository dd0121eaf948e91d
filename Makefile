# Two commands for a fresh machine: `make run` (set up, start the main demo) and `make test` (set up, run tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup run test lint typecheck proto bench clean

$(STAMP): pyproject.toml setup.py client/record/_native.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,test,spark,deploy]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(VENV)/bin/odradek demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy cannot follow the package-dir mapping of the editable install: check the package through a tree of links.
typecheck: setup
	rm -rf build/typecheck && mkdir -p build/typecheck/odradek
	for d in broker chaos client controller deploy proto spark_connector; do ln -s ../../../$$d build/typecheck/odradek/$$d; done
	$(VENV)/bin/mypy -p odradek

# The record, log and client suites run a second time on the pure-Python reference codec (the native accelerator
# disabled), as on a machine without a C compiler.
test: lint typecheck
	$(PY) -m pytest -q -ra
	ODRADEK_NO_EXTENSIONS=1 $(PY) -m pytest -q tests/record tests/log tests/client

proto: setup
	$(PY) proto/generate.py

bench: setup
	$(PY) bench/log_bench.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
