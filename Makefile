# Two commands for a fresh machine: `make run` (set up, start the main demo) and `make test` (set up, run tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup run test durations lint typecheck proto bench clean compat

$(STAMP): pyproject.toml setup.py client/record/_native.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,test,spark,deploy,chaos]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(VENV)/bin/odradek demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy cannot follow the package-dir mapping of the editable install: check the package through a tree of links.
# Its cache lives outside the checkout, as pip's does, so a fresh clone checks in about a second what it has checked
# before (mypy compares each module's hash with the cache's and rechecks what differs; measured 22.7 s cold, 0.7 s
# warm on this machine).
MYPY_CACHE ?= $(HOME)/.cache/odradek-mypy
typecheck: setup
	rm -rf build/typecheck && mkdir -p build/typecheck/odradek
	for d in broker chaos client controller deploy proto spark_connector; do ln -s ../../../$$d build/typecheck/odradek/$$d; done
	$(VENV)/bin/mypy --cache-dir $(MYPY_CACHE) -p odradek

# Tests run side by side (pytest-xdist): most of them wait on processes and sockets. Each file runs in one worker
# (tests/conftest.py groups them, longest first); each worker has its own ports and temporary directories. Three
# workers on this 2-core machine: with two, a third of its CPU stays idle while tests wait on nodes; with four, the
# pass is slower than with three (the nodes' CPU is then the limit) and tests miss their timing bounds
# (docs/testing.md has the figures).
TEST_WORKERS ?= 3
PARALLEL := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Every node, CLI call and test worker imports odradek: each module is compiled once into its bytecode cache, not
# again by every process, as it would be where the environment sets PYTHONDONTWRITEBYTECODE (measured: importing a
# node costs 2.5 s of CPU without the caches, 0.9 s with them, and the suite starts hundreds of processes).
unexport PYTHONDONTWRITEBYTECODE
COMPILE := $(PY) -m compileall -q broker client controller chaos deploy proto spark_connector > /dev/null

# The record, log and client suites run a second time on the pure-Python reference codec (the native accelerator
# disabled), as on a machine without a C compiler. The few tests marked `alone` compare latencies and run by
# themselves after the parallel pass. The first pass prints the slowest tests. ruff and mypy run first, so that
# a lint error fails at once (run beside the first pass they saved no measurable time: it starts with the suite's
# most CPU-bound files).
test: lint typecheck
	$(COMPILE)
	$(PY) -m pytest -q -ra $(PARALLEL) --durations=25 -m "not alone"
	$(PY) -m pytest -q -ra -m alone
	ODRADEK_NO_EXTENSIONS=1 $(PY) -m pytest -q $(PARALLEL) tests/record tests/log tests/client

# The Kafka clients' own suites (docs/compat.md), logs in build/compat/: kafka-python's integration suite (its 3.0.12
# sdist from PyPI, with stand-ins for the two files the sdist lacks) against a one-node cluster, then librdkafka's
# test programs against a 1+3 cluster, several side by side ($(ODRADEK_COMPAT_JOBS), default 6); their first run
# fetches Debian's source package and builds them into $(ODRADEK_COMPAT_CACHE) (default ~/.cache/odradek-compat).
compat: setup
	$(COMPILE)
	$(PY) tests/compat/kafka_python.py --sdist 3.0.12
	$(PY) tests/compat/librdkafka.py

# Measure each test file again for the order tests/conftest.py hands files out in (tests/durations.json), and its
# CPU seconds, its nodes' included (build/test-cpu.json): on 2 cores the suite is CPU-bound.
durations: setup
	$(COMPILE)
	$(PY) -m pytest -q $(PARALLEL) --record-durations

proto: setup
	$(PY) proto/generate.py

bench: setup
	$(PY) bench/log_bench.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
