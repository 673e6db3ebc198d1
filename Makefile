# Every target installs what it needs into ./.venv first (re-installed when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed


.PHONY: run chat test lint typecheck bench campaign format clean chromium

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/mel-gateway serve

chat: $(STAMP)
	$(BIN)/mel-gateway chat

test: $(STAMP) chromium
	$(BIN)/python -m pytest $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench

campaign: $(STAMP)
	$(BIN)/python -m bench.hardening_campaign

clean:
	rm -rf $(VENV) .mel .pytest_cache .mypy_cache .ruff_cache

# the console's browser tests drive Debian's Chromium: installed when missing (apt-get); under
# CI a Chromium that cannot be installed fails the run instead of skipping those tests
chromium:
	@command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || { \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  $$sudo apt-get update -qq && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } || \
	  { echo "chromium could not be installed: the browser tests (tests/browser) would be skipped"; \
	    [ -z "$$CI" ] || { echo "CI is set: a skipped browser test is a failure"; exit 1; }; }
