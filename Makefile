# The README's two commands: `make demo` and `make test`. Everything else
# bootstraps through `install`, which is redone only when pyproject.toml or
# constraints.txt change.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.install-stamp

.PHONY: install demo serve test test-unit migrate lint format bench bench-quick clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "convo-store needs Python 3.11+ (set PYTHON=python3.11)"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

demo: install
	$(BIN)/convo demo

serve: install
	$(BIN)/convo serve

migrate: install
	$(BIN)/convo migrate

test: install
	$(BIN)/pytest

test-unit: install
	$(BIN)/pytest -m "not integration"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Benchmarks need DATABASE_URL (or start the embedded server); each writes
# bench/results/<name>.json, then docs/benchmarks.md is regenerated.
bench: install
	$(BIN)/python -m bench

bench-quick: install
	CONVO_BENCH_QUICK=1 $(BIN)/python -m bench write_path read_path

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
