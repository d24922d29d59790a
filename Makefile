# Two commands: `make run` (install + serve on the embedded default) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
# Compiled modules are cached between processes, even where the environment turns the cache off:
# a test run starts hundreds of them (servers, runtimes, plugins, workers, commands).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-fast coverage install install-test browser servers sandbox bench bench-scale cluster

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

# pip runs again only when pyproject.toml changed (the install is editable: code changes need
# no reinstall).
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@ $(VENV)/.installed

$(VENV)/.installed-cluster: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[cluster]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

# The browser tests drive Debian's chromium through chromium-driver; installed once.
browser:
	@if [ ! -x /usr/bin/chromedriver ]; then \
	  SUDO=""; if [ "$$(id -u)" != "0" ]; then SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    chromium chromium-driver fonts-liberation >/dev/null; \
	fi

# PostgreSQL and Redis for the cluster tests, the PostgreSQL pass and `make cluster`, nginx for
# the cluster tests' proxy, bubblewrap, which confines the plugins, and Prometheus, which
# scrapes a LangHost in a test, and jq, which the README's walkthrough (run by a test) uses:
# Debian's binaries,
# installed once. No system service is used: the tests start private instances (the services
# Debian's packages may start are stopped).
servers:
	@if ! command -v redis-server >/dev/null || [ ! -x /usr/sbin/nginx ] || ! command -v bwrap >/dev/null \
	    || ! command -v prometheus >/dev/null || ! command -v jq >/dev/null \
	    || ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then \
	  SUDO=""; if [ "$$(id -u)" != "0" ]; then SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    redis-server postgresql nginx bubblewrap prometheus jq >/dev/null; \
	  for service in redis-server postgresql nginx prometheus; do \
	    $$SUDO service $$service stop >/dev/null 2>&1 || true; \
	  done; \
	fi

# bubblewrap is the plugins' first-choice sandbox: installed when this user may (root, or
# passwordless sudo). Without it LangHost confines them with Python and the kernel alone
# (runners/runtime/sandbox.py), and says so.
sandbox:
	@if ! command -v bwrap >/dev/null; then \
	  SUDO=""; if [ "$$(id -u)" != "0" ]; then SUDO="sudo -n"; fi; \
	  if { [ -z "$$SUDO" ] || sudo -n true 2>/dev/null; } && command -v apt-get >/dev/null \
	      && $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
	      -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1; then \
	    echo "Installed bubblewrap: plugins are confined by it."; \
	  else \
	    echo "bubblewrap could not be installed here (needs root or passwordless sudo, and apt):" \
	      "plugins and the box are confined with Python and the kernel alone."; \
	  fi; \
	fi

run: install sandbox
	$(PY) manage.py serve

# The suite in tiers, each test in one (conftest.py watches that a test starting a process
# says so):
# - in-process (`make test-fast`, the edit loop): no mark;
# - processes: `processes` (the runtime, plugins, commands, servers);
# - end to end: `e2e`, `browser`, `cluster` (daphne, chromium, deploy/'s layout);
# - PostgreSQL: `backend`, the tests whose behaviour depends on the database, once more on a
#   private PostgreSQL.
# `make test` runs every tier, as CI does: the first three together on SQLite, across the cores
# (a database and data dir each; the slowest files first), then the fourth. It runs both and
# fails if either did.
IN_PROCESS := -m "not processes and not e2e and not browser and not cluster"
# A worker a core (two a core left load-bound tests flaky). Files go out in the order
# conftest.py gives them (the longest first), not re-sorted by their number of tests.
XDIST := --numprocesses=auto --dist=loadfile --no-loadscope-reorder

test: install-test browser servers
	$(PY) -m ruff check .
	$(PY) manage.py makemigrations --check --dry-run
	status=0; \
	$(PY) -m pytest $(XDIST) --durations=10 || status=$$?; \
	$(PY) -m langhost.local_servers -- env -u REDIS_URL \
	  $(PY) -m pytest $(XDIST) --durations=10 -m backend || status=$$?; \
	exit $$status

test-fast: install-test
	$(PY) -m pytest $(XDIST) $(IN_PROCESS)

# Line coverage of the apps by both passes of `make test` (in this process and its workers;
# not in the servers and runtimes the tests start).
COVERAGE := --cov=accounts --cov=ledger --cov=langhost --cov=runners --cov-report=
coverage: install-test browser servers
	-$(PY) -m pytest $(XDIST) $(COVERAGE) -q
	-$(PY) -m langhost.local_servers -- env -u REDIS_URL \
	  $(PY) -m pytest $(XDIST) $(COVERAGE) --cov-append -q -m backend
	$(PY) -m coverage report --skip-covered --sort=cover | tail -15

# deploy/'s layout on this machine: private PostgreSQL and Redis, then deploy/Procfile's two web
# processes (ports 8000, 8001) and two runtime workers (health on 8100, 8101). Ctrl-C stops all.
cluster: $(VENV)/.installed-cluster servers
	LANGHOST_DATA_DIR=$${LANGHOST_DATA_DIR:-data/cluster} PATH=$(CURDIR)/$(VENV)/bin:$$PATH \
	  $(PY) -m langhost.local_servers -- \
	  honcho start -f deploy/Procfile -d . -e deploy/cluster.env -c web=2,runtime=2 -p 8000

# The model benchmark's scripted provider lives with the tests: install their extras too.
bench: install-test
	$(PY) bench/run_overhead.py
	$(PY) bench/http_overhead.py
	$(PY) bench/llm_overhead.py
	$(PY) bench/isolation.py
	$(PY) bench/knowledge.py
	$(PY) bench/tracing_overhead.py
	$(PY) bench/concurrency.py

# Reads and writes on a ledger of 300,000 runs against one of 10,000 (several minutes).
bench-scale: install-test
	$(PY) bench/ledger_scale.py
