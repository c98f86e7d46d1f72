# Two commands do all of their own set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demo needs the core and rich only: a small environment of its own, not the dev one
# (--no-compile: the modules it uses compile on their first import, the rest never).
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

.PHONY: demo test lint typecheck unit bench soak soak-workers bench-workers bench-temporal clean bubblewrap \
	nodejs

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

# ruff, mypy and the suite at once, once what they need is installed: mypy (about a minute on
# one core) overlaps the suite's waits on processes and servers (measured on 2 cores: 465 s
# one after the other, 381 s together).
test: $(STAMP) bubblewrap $(MCP_REFERENCE_STAMP)
	$(MAKE) --no-print-directory -j3 lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check toolvisor tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict toolvisor

# The MCP tests run the reference server, @modelcontextprotocol/server-everything, pinned, with
# node from the distribution (installed here as bubblewrap is) in tests/.npm; its VERSION in
# tests/support/reference_mcp.py is this one, and the tests check the one installed against it.
MCP_REFERENCE_VERSION := 2026.8.31
MCP_REFERENCE_DIR := tests/.npm
MCP_REFERENCE_STAMP := $(MCP_REFERENCE_DIR)/.installed-$(MCP_REFERENCE_VERSION)
NODE_MISSING := make test needs node and npm for the MCP reference server: install the \
	'nodejs' and 'npm' packages (apt-get install nodejs npm; dnf install nodejs npm)
nodejs:
	@command -v node >/dev/null && command -v npm >/dev/null || { \
	  [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	    && apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; } || { \
	  echo "$(NODE_MISSING)" >&2; exit 1; }
$(MCP_REFERENCE_STAMP): | nodejs
	npm install --silent --no-audit --no-fund --prefix $(MCP_REFERENCE_DIR) \
	  @modelcontextprotocol/server-everything@$(MCP_REFERENCE_VERSION)
	touch $@

# Two processes: the suite waits on real processes, servers and sockets as much as it computes.
# The tests that share something machine-wide (Ray, the sandbox) run on one of them (conftest).
unit: $(STAMP) bubblewrap $(MCP_REFERENCE_STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup

# The sandbox tests run real sandboxes: bubblewrap is installed here when this runs as root
# with apt-get, and otherwise named (no test skips without it).
BWRAP_MISSING := make test needs bubblewrap's bwrap for isolation='sandbox': install the \
	'bubblewrap' package (apt-get install bubblewrap; dnf install bubblewrap)
bubblewrap:
	@command -v bwrap >/dev/null || { \
	  [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	    && apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; } || { \
	  echo "$(BWRAP_MISSING)" >&2; exit 1; }

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
	$(BIN)/python -m bench.workers --only soak --soak-runs 1500 --kills 10 --restarts 2

bench-workers: $(STAMP)
	$(BIN)/python -m bench.workers

# toolvisor on Temporal next to pydantic-ai's and the OpenAI Agents SDK's Temporal integrations,
# on one local dev server; the SDK's plugin pins openai-agents 0.22, so it and the SDK it needs
# go to a folder of their own, first on the bench's path (the environment keeps its own)
BENCH_OPENAI_AGENTS := .bench-openai-agents
$(BENCH_OPENAI_AGENTS)/.installed: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps --target $(BENCH_OPENAI_AGENTS) \
	  temporalio==1.35.0 openai-agents==0.22.3 temporalio-openai-agents==1.1.0
	touch $@

bench-temporal: $(BENCH_OPENAI_AGENTS)/.installed
	PYTHONPATH=$(BENCH_OPENAI_AGENTS) $(BIN)/python -m bench.temporal

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(MCP_REFERENCE_DIR) $(BENCH_OPENAI_AGENTS) build *.egg-info
