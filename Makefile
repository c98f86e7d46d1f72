# Two commands do all of their own set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demo needs the core and rich only: a small environment of its own, not the dev one
# (--no-compile: the modules it uses compile on their first import, the rest never).
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

.PHONY: demo test lint typecheck unit bench soak soak-workers bench-workers clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install --quiet --no-compile -e '.[observe]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/python -m examples.demo

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check toolvisor tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict toolvisor

unit: $(STAMP)
	$(BIN)/python -m pytest

BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench

soak: $(STAMP)
	$(BIN)/python -m bench.soak --calls 20000 --crashes 5

# workers on one PostgreSQL store (a server of their own): kill -9 soak; throughput, failover
soak-workers: $(STAMP)
	$(BIN)/python -m bench.workers --only soak --soak-runs 1500 --kills 10

bench-workers: $(STAMP)
	$(BIN)/python -m bench.workers

clean:
	rm -rf $(VENV) $(DEMO_VENV) build *.egg-info
