# rndb — the two commands of the README, and their parts.
#   make demo   the main job on the embedded default
#   make test   installs what the tests need (a venv with maturin, pytest, mypy) and runs every test

VENV    ?= .venv
PYTHON  ?= python3
PIP      = $(VENV)/bin/pip
CARGO   ?= cargo

.PHONY: demo test test-rust test-python venv py lint bench

demo:
	$(CARGO) run --release -p rndb --example demo

test: test-rust test-python

test-rust:
	$(CARGO) test --workspace --exclude rndb-py

venv: $(VENV)/.installed

$(VENV)/.installed:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "maturin>=1.9.4,<2" "pytest>=8" "mypy>=1.10"
	touch $@

py: venv
	$(PIP) install --quiet --force-reinstall --no-deps ./py

test-python: py
	$(VENV)/bin/python -m pytest -q tests/python

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench:
	$(CARGO) run --release -p rndb-benches --bin core_kv
