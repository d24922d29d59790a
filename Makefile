# Two commands: `make run` (install + serve on the embedded default) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test install install-test browser redis bench

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

# The worker-mode tests run two processes through a real Redis: Debian's, installed once.
redis:
	@if ! command -v redis-server >/dev/null; then \
	  SUDO=""; if [ "$$(id -u)" != "0" ]; then SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    redis-server >/dev/null; \
	fi

run: install
	$(PY) manage.py serve

test: install-test browser redis
	$(PY) -m ruff check .
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) -m pytest

# The model benchmark's scripted provider lives with the tests: install their extras too.
bench: install-test
	$(PY) bench/run_overhead.py
	$(PY) bench/http_overhead.py
	$(PY) bench/llm_overhead.py
