# Triton Model Hub. `make run` serves the whole product; `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
PYTEST_ARGS ?=
# The suite runs in parallel (pytest-xdist, docs/testing.md): four processes measured best on
# two cores, since most integration tests wait on servers rather than compute. Groups keep
# what must not overlap apart (tests/fixtures/suites.py). PYTEST_ARGS only adds to this:
# `PYTEST_ARGS=-n0` runs in one process, `PYTEST_ARGS=--lf` reruns what failed last time.
PYTEST_PARALLEL ?= -n 4 --dist loadgroup
PYTEST := $(PY) -m pytest $(PYTEST_PARALLEL)

# Some machines tell Python never to write bytecode (PYTHONDONTWRITEBYTECODE); every process
# then compiles Django, NumPy and the tests from source each time it starts: about 0.5 s per
# worker or stack process and 9 s of pytest's assertion rewriting per run. The bytecode is
# kept in this user's cache instead (out of the source tree, shared by every clone; Python
# checks each file against its source, so a stale one is never used).
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX ?= $(HOME)/.cache/triton-model-hub/pycache

.PHONY: run node test test-unit test-integration test-fast lint lint-fast typecheck check \
	compose-images clean-var help

help:
	@echo "make run              start the whole stack at http://127.0.0.1:8080/ (Ctrl-C stops it)"
	@echo "make node NAME=b      another node (its own Triton and worker) for the running hub"
	@echo "make test             run every test (unit, integration, browser, heavy suites)"
	@echo "make test-fast        before a commit: lint (no translations), types, unit tests"
	@echo "make test-unit        only the fast unit tests"
	@echo "make test-integration only tests that start real services (Triton, Redis, browser)"
	@echo "                      (PYTEST_ARGS=... adds pytest options, e.g. --lf, -k NAME, -n0)"
	@echo "make lint / typecheck ruff (lint + format check), import layers, djLint, translations / mypy"
	@echo "make compose-images   build the compose stack's images here (Debian packages, no registry)"

# Packages are installed with uv when it can be had (about a second from a warm cache; pip took
# about a minute), else with pip. uv is the one on PATH, else one bootstrapped once with pip into
# UV_HOME (shared by every clone of this user); UV=none forces pip. `make run` installs only
# what the product needs (requirements.txt); `make test`, lint and typecheck add the rest.
UV_VERSION := 0.13.8
UV_HOME ?= $(HOME)/.cache/triton-model-hub/uv-$(UV_VERSION)
UV ?= $(shell command -v uv 2>/dev/null)

# $(call install,REQUIREMENTS_FILE)
define install
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed (found " + sys.version.split()[0] + "); set PYTHON=python3.11")'
	@set -e; uv="$(UV)"; \
	if [ -z "$$uv" ]; then \
	  if [ ! -x "$(UV_HOME)/bin/uv" ]; then \
	    { $(PYTHON) -m venv "$(UV_HOME)" && "$(UV_HOME)/bin/python" -m pip install --quiet \
	      --disable-pip-version-check "uv==$(UV_VERSION)"; } >/dev/null 2>&1 \
	      || { echo "uv could not be installed; installing with pip (slower)"; rm -rf "$(UV_HOME)"; }; \
	  fi; \
	  if [ -x "$(UV_HOME)/bin/uv" ]; then uv="$(UV_HOME)/bin/uv"; fi; \
	fi; \
	if [ -n "$$uv" ] && [ "$$uv" != none ]; then \
	  test -x $(PY) || "$$uv" venv --quiet --seed --python "$$(command -v $(PYTHON))" $(VENV); \
	  echo "installing $(1) with $$uv"; \
	  "$$uv" pip install --quiet --python $(PY) -c constraints.txt -r $(1); \
	else \
	  test -x $(PY) || $(PYTHON) -m venv $(VENV); \
	  echo "installing $(1) with pip"; \
	  $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -r $(1); \
	fi
endef

# LDAP sign-in's python-ldap builds against OpenLDAP (docs/sso.md#ldap): installed where its
# headers are (Debian: libldap2-dev libsasl2-dev), else left out with a note, and a hub with
# LDAP_SERVER_URI set says at start what to install.
LDAP_HEADERS := $(and $(wildcard /usr/include/ldap.h),$(wildcard /usr/include/sasl/sasl.h))
# A marker says it was left out, so that the next make, once the headers are there, installs it.
define install_ldap
$(if $(LDAP_HEADERS),$(call install,requirements-ldap.txt),@echo "LDAP sign-in left out: OpenLDAP's headers are missing (apt install libldap2-dev libsasl2-dev, then make again)")
@$(if $(LDAP_HEADERS),rm -f,touch) $(VENV)/.ldap-left-out
endef
ifneq ($(and $(LDAP_HEADERS),$(wildcard $(VENV)/.ldap-left-out)),)
LDAP_CATCH_UP := ldap-catch-up
endif
.PHONY: ldap-catch-up

$(RUN_STAMP): requirements.txt requirements-ldap.txt constraints.txt $(LDAP_CATCH_UP)
	$(call install,requirements.txt)
	$(install_ldap)
	@touch $@

$(STAMP): requirements.txt requirements-dev.txt requirements-ldap.txt constraints.txt $(LDAP_CATCH_UP)
	$(call install,requirements-dev.txt)
	$(install_ldap)
	@touch $@ $(RUN_STAMP)

# The images docker-compose.yml names, built on this host (deploy/images/build.py,
# docs/deploy.md); writes a first .env when there is none. HUB_IMAGES_FROM=registry builds
# only the hub and Triton images and leaves PostgreSQL, Redis and Caddy to upstream's.
compose-images: $(RUN_STAMP)
	$(PY) deploy/images/build.py

run: $(RUN_STAMP)
	exec $(PY) -m webapp.stack

# A node joined to the running hub (docs/nodes.md#running-a-node); Ctrl-C stops that node only.
node: $(RUN_STAMP)
	@test -n "$(NAME)" || { echo "usage: make node NAME=<name>"; exit 2; }
	exec $(PY) -m workers.node.launch "$(NAME)"

test: $(STAMP)
	$(PYTEST) $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(PYTEST) -m "not integration and not browser" $(PYTEST_ARGS)

test-integration: $(STAMP)
	$(PYTEST) -m "integration or browser" $(PYTEST_ARGS)

# What a contributor runs before a commit (about 75 s on two cores, docs/testing.md):
# lint without the translation checks, types, then the unit tests, last run's failures first.
test-fast: lint-fast typecheck
	$(PYTEST) -m "not integration and not browser" --failed-first $(PYTEST_ARGS)

lint-fast: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/djlint templates --lint

lint: lint-fast
	@# Translations (docs/i18n.md): catalogues up to date with the marked strings (needs GNU
	@# gettext), and no unmarked text in the templates that are already translated.
	$(PY) -m tools.i18n_check
	$(PY) -m tools.i18n_unmarked --enforce

typecheck: $(STAMP)
	$(VENV)/bin/mypy model_store webapp workers tools

check: lint typecheck test

clean-var:
	rm -rf var
