# Every target installs what it needs into ./.venv first (re-installed when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed


NATIVE := build/guard-native/manifest.json


.PHONY: run chat test lint typecheck bench campaign format clean chromium

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The guard compiled with mypyc (guard/build.py; guard/native.py says when it is used), rebuilt
# when a module changes. Where it cannot be built the guard runs as pure Python, only slower;
# under CI that is a failure.
$(NATIVE): $(STAMP) $(wildcard guard/_*.py)
	$(BIN)/python -m guard.build || { echo "the guard could not be compiled: it runs as pure Python"; \
	  [ -z "$$CI" ] || { echo "CI is set: a guard that cannot be compiled is a failure"; exit 1; }; }

run: $(STAMP) $(NATIVE)
	$(BIN)/mel-gateway serve

chat: $(STAMP) $(NATIVE)
	$(BIN)/mel-gateway chat

# the tests that replace a guard function or constant (pytest -m pure_python) see only the pure
# guard: a second pass runs them so (when no ARGS narrow the run)
test: $(STAMP) chromium $(NATIVE)
	$(BIN)/python -m pytest $(ARGS)
	[ -n "$(ARGS)" ] || MEL_GUARD_PURE=1 $(BIN)/python -m pytest -q -m pure_python

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP) $(NATIVE)
	$(BIN)/python -m bench

campaign: $(STAMP)
	$(BIN)/python -m bench.hardening_campaign

clean:
	rm -rf $(VENV) .mel .pytest_cache .mypy_cache .ruff_cache build/guard-native

# the console's browser tests drive Debian's Chromium: installed when missing (apt-get); under
# CI a Chromium that cannot be installed fails the run instead of skipping those tests
chromium:
	@command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || { \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  $$sudo apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } || \
	  { echo "chromium could not be installed: the browser tests (tests/browser) would be skipped"; \
	    [ -z "$$CI" ] || { echo "CI is set: a skipped browser test is a failure"; exit 1; }; }
