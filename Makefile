# The README's two commands: `make demo` and `make test`. Everything else
# bootstraps through `install`, which is redone only when pyproject.toml or
# constraints.txt change.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.install-stamp
HOST   ?= 127.0.0.1
PORT   ?= 8000

# `PYTHON=python3.12 make …` with a .venv made by another interpreter: start
# the venv again rather than keep the old one without a word.
ifneq ($(filter environment command,$(origin PYTHON)),)
  ifneq ($(wildcard $(BIN)/python),)
    WANTED_PY := $(shell $(PYTHON) -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)
    VENV_PY   := $(shell $(BIN)/python -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)
    ifneq ($(WANTED_PY),$(VENV_PY))
      STALE_VENV := .venv runs Python $(VENV_PY), PYTHON=$(PYTHON) is $(WANTED_PY): making .venv again
    endif
  endif
endif
# The peers bench/peers compares the store with live in their own virtualenv,
# which the project's install never needs (`make bench-peers` creates it).
PEERS_VENV  := .venv-peers
PEERS_BIN   := $(PEERS_VENV)/bin
PEERS_STAMP := $(PEERS_VENV)/.install-stamp
# google-adk pins google-genai below what the dev extra tests against: the ADK
# adapter's tests run in a virtualenv of their own (constraints-google-adk.txt).
ADK_VENV  := .venv-adk
ADK_BIN   := $(ADK_VENV)/bin
ADK_STAMP := $(ADK_VENV)/.install-stamp
ADK_TESTS := tests/adapters/test_google_adk.py tests/adapters/test_docs.py

FORCE:

.PHONY: install demo serve test test-unit test-adk migrate lint format bench bench-quick bench-peers bench-frameworks reliability clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt $(if $(STALE_VENV),FORCE)
	@$(if $(STALE_VENV),echo "$(STALE_VENV)" && rm -rf $(VENV),true)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "convo-store needs Python 3.11+ (set PYTHON=python3.11)"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,embedded,server,client,openai-agents,langchain,langgraph]'
	@touch $(STAMP)

demo: install
	$(BIN)/convo demo

serve: install
	$(BIN)/convo serve --host $(HOST) --port $(PORT)

migrate: install
	$(BIN)/convo migrate

test: install $(ADK_STAMP)
	$(BIN)/pytest
	$(ADK_BIN)/pytest $(ADK_TESTS)

# constraints.txt without the names constraints-google-adk.txt pins, then those.
$(ADK_STAMP): pyproject.toml constraints.txt constraints-google-adk.txt
	@test -x $(ADK_BIN)/python || $(PYTHON) -m venv $(ADK_VENV)
	@$(ADK_BIN)/python -c 'import re, sys; name = lambda l: re.sub(r"[-_.]+", "-", l.split("==")[0].strip()).lower(); over = {name(l) for l in open(sys.argv[1]) if "==" in l and not l.startswith("#")}; sys.stdout.writelines(l for l in open(sys.argv[2]) if name(l) not in over)' constraints-google-adk.txt constraints.txt > $(ADK_VENV)/constraints.txt
	$(ADK_BIN)/python -m pip install --quiet --disable-pip-version-check -c $(ADK_VENV)/constraints.txt -c constraints-google-adk.txt -e '.[google-adk,embedded,server,client]' pytest pytest-asyncio hypothesis
	@touch $@

test-adk: $(ADK_STAMP)
	$(ADK_BIN)/pytest $(ADK_TESTS)

# The fast layer: no database (nothing marked integration, which every test
# that takes a database fixture is: tests/conftest.py) and nothing marked slow,
# the ADK adapter's included (in its own virtualenv).
test-unit: install $(ADK_STAMP)
	$(BIN)/pytest -m "not integration and not slow"
	$(ADK_BIN)/pytest -m "not integration and not slow" $(ADK_TESTS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Benchmarks need DATABASE_URL (or start the embedded server); each writes
# bench/results/<name>.json, then docs/benchmarks.md is regenerated.
# Everything, peers included (their environment is made on first use).
bench: install $(PEERS_STAMP)
	$(BIN)/python -m bench
	$(MAKE) --no-print-directory bench-peers

# Quick mode writes to bench/results/quick/ (untracked), never over the
# published figures: only `make bench` updates those and docs/benchmarks.md.
bench-quick: install
	CONVO_BENCH_QUICK=1 $(BIN)/python -m bench write_path read_path

# The store against langchain-postgres, the OpenAI Agents SDK, Google ADK and
# LangGraph on the same server (bench/peers; ~10 min, CONVO_BENCH_QUICK=1 for a
# first look): installs them (pins: bench/peers_requirements.txt) into
# $(PEERS_VENV), then writes bench/results/peers.json and docs/benchmarks.md. A
# peer that fails to install or to run is reported with the reason.
$(PEERS_STAMP): pyproject.toml constraints.txt bench/peers_requirements.txt bench/peers/install.py
	@test -x $(PEERS_BIN)/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_BIN)/python bench/peers/install.py
	@touch $@

bench-peers: $(PEERS_STAMP)
	$(PEERS_BIN)/python -m bench peers

# The framework adapters beside LangGraph's and ADK's own PostgreSQL stores
# (bench/frameworks.py), in the peers' virtualenv.
bench-frameworks: $(PEERS_STAMP)
	$(PEERS_BIN)/python -m bench frameworks

# A bounded soak (~5 min; CONVO_SOAK_SECONDS shortens it) of the HTTP service on
# loopback, database restarted mid-run, then an integrity check (bench/reliability.py).
reliability: install
	$(BIN)/python -m bench.reliability

clean:
	rm -rf $(VENV) $(ADK_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
