# Two commands set up a fresh machine: `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench-quick clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/wordcount.py

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench-quick: $(STAMP)
	$(PY) -m benchmarks coordination --quick
	$(PY) -m benchmarks exchange --quick
	$(PY) -m benchmarks wordcount --quick

clean:
	rm -rf $(VENV) build *.egg-info
