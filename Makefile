# Set-up is part of every target: each creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: run test test-slow test-spark lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/kudusql

# The test command: lint, types, import contracts, then the suite (slow suites excluded).
# The Spark suite (local[2], one JVM) runs on one xdist worker: --dist loadgroup.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -m "not slow" -n 2 --dist loadgroup -q

# Long suites: hundreds of writer SIGKILLs, and a 2,000-example storage state machine.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -n 2 -q
	KUDUSQL_SM_EXAMPLES=2000 $(BIN)/python -m pytest -q tests/storage/tablet/test_tablet_model.py

# The Spark suite alone (needs Java 17).
test-spark: $(STAMP)
	$(BIN)/python -m pytest -m spark -q

lint: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
