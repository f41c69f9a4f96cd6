# Triton Model Hub. `make run` serves the whole product; `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: run node test test-unit test-integration lint typecheck check clean-var help

help:
	@echo "make run              start the whole stack at http://127.0.0.1:8080/ (Ctrl-C stops it)"
	@echo "make node NAME=b      another node (its own Triton and worker) for the running hub"
	@echo "make test             run every test (unit, integration, browser)"
	@echo "make test-unit        only the fast unit tests"
	@echo "make test-integration only tests that start real services (Triton, Redis, browser)"
	@echo "make lint / typecheck ruff (lint + format check), import layers, djLint / mypy"

$(STAMP): requirements.txt requirements-dev.txt constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed (found " + sys.version.split()[0] + "); set PYTHON=python3.11")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -r requirements-dev.txt
	@touch $@

run: $(STAMP)
	exec $(PY) -m webapp.stack

# A node joined to the running hub (docs/nodes.md#running-a-node); Ctrl-C stops that node only.
node: $(STAMP)
	@test -n "$(NAME)" || { echo "usage: make node NAME=<name>"; exit 2; }
	exec $(PY) -m workers.node.launch "$(NAME)"

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(PY) -m pytest -m "not integration and not browser" $(PYTEST_ARGS)

test-integration: $(STAMP)
	$(PY) -m pytest -m "integration or browser" $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/djlint templates --lint

typecheck: $(STAMP)
	$(VENV)/bin/mypy model_store webapp workers

check: lint typecheck test

clean-var:
	rm -rf var
