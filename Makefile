# Two commands: `make run` (install + serve on the embedded default) and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test install install-test lint bench

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

install: $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e .

install-test: $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'

run: install
	$(PY) manage.py serve

test: install-test
	$(PY) -m ruff check .
	$(PY) manage.py makemigrations --check --dry-run
	$(PY) -m pytest

bench: install
	$(PY) bench/run_overhead.py
