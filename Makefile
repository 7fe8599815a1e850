# sessiontree developer commands. `make help` lists them.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
# The dev build carries the test hooks (fault injection); `[tool.maturin] features` in
# pyproject.toml stays `python` alone, so a plain `maturin build` ships without them.
# `python` is repeated here in case the command line replaces pyproject's list.
DEV_FEATURES := --features python,test-hooks
# The extras a dev install brings, and the pins of their test dependencies (pip reads
# PIP_CONSTRAINT, a space-separated list, when maturin installs the extras): the async API's
# test tools, and the agent frameworks behind the adapters (sessiontree.adapters).
ADAPTER_EXTRAS := openai-agents,claude-agent-sdk,pydantic-ai,langgraph
EXTRAS := dev,cli,aio-test,langgraph-test,$(ADAPTER_EXTRAS)
CONSTRAINTS := constraints/async.txt constraints/adapters.txt constraints/langgraph.txt

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

# maturin runs pip without -q: PIP_QUIET keeps its "Collecting ..." lines out of the way.
export PIP_QUIET := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install "maturin>=1.7,<2"

# The same cargo features as `install`, so `make demo` then `make test` compiles once.
.PHONY: install-demo
install-demo: $(PY) ## Create .venv with what the demo needs: the package and its `cli` extra
	$(BIN)/maturin develop --release $(DEV_FEATURES) --extras cli -q

.PHONY: install
install: $(PY) ## Create .venv, install the dev and test tools and build the extension (release)
	PIP_CONSTRAINT="$(CONSTRAINTS)" $(BIN)/maturin develop --release $(DEV_FEATURES) --extras $(EXTRAS) -q
	$(BIN)/pip install -c constraints/postgres.txt psycopg psycopg-binary psycopg-pool

.PHONY: build-dev
build-dev: $(PY) ## Rebuild the extension in debug mode (faster to compile)
	PIP_CONSTRAINT="$(CONSTRAINTS)" $(BIN)/maturin develop $(DEV_FEATURES) --extras $(EXTRAS) -q
	$(BIN)/pip install -c constraints/postgres.txt psycopg psycopg-binary psycopg-pool

.PHONY: demo
demo: install-demo ## Install the package, then build a real session on disk and print its tree and context
	$(PY) examples/demo.py demo-sessions

.PHONY: test-rust
test-rust: ## cargo test (the engine with its test hooks, no Python needed)
	cargo test --quiet --features test-hooks

.PHONY: test-python
test-python: ## pytest (the package; needs `make install`)
	$(PY) -m pytest -q

.PHONY: test
test: install test-rust test-python ## Everything: build, cargo test, pytest

# The Python suite once more on the engine's portable OS layer (what macOS and Windows
# build; the `portable` feature forces it on Linux): the extension is built into
# target/portable and imported from a copy of the package in .portable/.
.PHONY: test-portable
test-portable: $(PY) ## pytest on the engine's portable OS layer (cargo feature `portable`)
	CARGO_TARGET_DIR=target/portable cargo build --release --quiet --lib $(DEV_FEATURES),portable
	rm -rf .portable && mkdir .portable && cp -r python/sessiontree .portable/
	cp target/portable/release/lib_core.so .portable/sessiontree/_core.abi3.so
	PYTHONPATH=$(CURDIR)/.portable SESSIONTREE_EXPECT_PORTABLE=1 $(PY) -m pytest -q -p no:cacheprovider tests .portable/sessiontree

# The agent frameworks' own tests (their sessions' and stores' tests, the Runner's) run
# against the adapters: tests/upstream/run.sh fetches the sdists constraints/adapters.txt
# pins from PyPI into .upstream/ and swaps their stores for ours. Not part of `make test`.
# With a PostgreSQL server (SESSIONTREE_PG_DSN: tests/postgres/pg-cluster.sh start), it also
# shows that the Claude Agent SDK's tests we deselect as "reference:" fail with the SDK's own
# PostgreSQL store (run.sh --reference).
.PHONY: upstream-tests
upstream-tests: ## Run the OpenAI Agents and Claude Agent SDKs' own tests on the adapters
	tests/upstream/run.sh
	@if [ -n "$$SESSIONTREE_PG_DSN" ]; then tests/upstream/run.sh claude-agent-sdk --reference; \
	else echo "upstream-tests: SESSIONTREE_PG_DSN not set, the --reference run is skipped"; fi

.PHONY: lint
lint: ## cargo fmt --check, clippy -D warnings, ruff, mypy --strict, stub check
	cargo fmt --all -- --check
	cargo clippy --all-targets --quiet -- -D warnings
	cargo clippy --all-targets --features test-hooks --quiet -- -D warnings
	cargo clippy --features python --quiet -- -D warnings
	cargo clippy --features python,test-hooks --quiet -- -D warnings
	$(BIN)/ruff check python tests benches examples
	$(BIN)/ruff format --check python tests benches examples
	$(BIN)/mypy python/sessiontree
	$(PY) -m mypy.stubtest sessiontree._core

.PHONY: generate
generate: ## Rewrite the generated source: the async API's stub
	$(PY) -m sessiontree.aio._stubgen

.PHONY: format
format: ## Format Rust and Python sources
	cargo fmt --all
	$(BIN)/ruff format python tests benches examples
	$(BIN)/ruff check --fix python tests benches examples

# macOS and Windows: the engine (with its tests) and the binding compiled and linted for
# their targets, nothing linked or run. It catches an OS call outside the portable path of
# rust/engine/sys.rs, which the Linux build cannot see.
OTHER_TARGETS := x86_64-pc-windows-msvc aarch64-apple-darwin x86_64-apple-darwin
.PHONY: check-targets
check-targets: ## cargo clippy -D warnings for Windows and macOS targets (no linking)
	rustup target add $(OTHER_TARGETS)
	for t in $(OTHER_TARGETS); do \
		cargo clippy --target $$t --all-targets --features test-hooks --quiet -- -D warnings && \
		cargo clippy --target $$t --lib --features python --quiet -- -D warnings || exit 1; \
	done

# The wheel users install: abi3 (one wheel for every CPython >= 3.10), tagged manylinux2014
# through zig as the linker (`ziglang` from PyPI: no container needed), plus the sdist;
# then checked. Built without the test hooks (pyproject's features: `python` alone).
.PHONY: wheel
wheel: $(PY) ## Build the abi3 manylinux wheel and the sdist into dist/, and check them
	$(BIN)/pip install -q "ziglang>=0.13" "auditwheel>=6" "twine>=5"
	rm -rf dist
	# maturin finds zig through `python -m ziglang`: the venv's python must come first.
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/maturin build --release --zig --compatibility manylinux2014 --out dist -q
	$(BIN)/maturin sdist --out dist
	$(BIN)/auditwheel show dist/*.whl
	$(BIN)/twine check --strict dist/*

# A fresh venv with only the wheel (and the cli extra), then the console script run there.
.PHONY: wheel-smoke
wheel-smoke: wheel ## Install the wheel into a fresh venv and run `sessiontree` from it
	rm -rf .wheel-venv
	$(PYTHON) -m venv .wheel-venv
	.wheel-venv/bin/pip install dist/*.whl
	# A plain install (no `cli` extra): the command works, in plain text.
	cd /tmp && $(CURDIR)/.wheel-venv/bin/sessiontree --version
	cd /tmp && $(CURDIR)/.wheel-venv/bin/sessiontree --help > /dev/null
	rm -rf .wheel-venv/demo && cd /tmp && $(CURDIR)/.wheel-venv/bin/python $(CURDIR)/examples/demo.py $(CURDIR)/.wheel-venv/demo > /dev/null
	.wheel-venv/bin/sessiontree tree .wheel-venv/demo/demo.jsonl
	! .wheel-venv/bin/python -c "import rich" 2>/dev/null
	# The wheel ships the licence and leaves the development-only generators out.
	$(PYTHON) -m zipfile -l dist/*.whl | grep -q 'dist-info/.*LICENSE'
	! $(PYTHON) -m zipfile -l dist/*.whl | grep -E 'model/_gen\.py|aio/_stubgen\.py'
	.wheel-venv/bin/pip install "$$(ls dist/*.whl)[cli]"
	.wheel-venv/bin/sessiontree --version
	.wheel-venv/bin/sessiontree ls .wheel-venv/demo
	.wheel-venv/bin/sessiontree tree .wheel-venv/demo/demo.jsonl
	.wheel-venv/bin/sessiontree check .wheel-venv/demo/demo.jsonl
	.wheel-venv/bin/sessiontree export .wheel-venv/demo/demo.jsonl --html -o .wheel-venv/demo/demo.html
	.wheel-venv/bin/python -m sessiontree stats .wheel-venv/demo/demo.jsonl --json > /dev/null

.PHONY: bench
bench: install ## Run the benchmark suite for real and print the results table
	$(PY) benches/report.py
