# Set-up is part of every target: each creates .venv and installs what it needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

FLOORS := .venv-floors
FLOORS_STAMP := $(FLOORS)/.installed

.PHONY: run test test-floors test-slow test-spark lint bench bench-ycsb clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

# The dependency floors: the lowest supported version of every runtime dependency
# (requirements-floors.txt), without pandas, polars, SQLAlchemy or Spark; the optional
# packages' floors (requirements-floors-extras.txt) go to a directory of their own, put
# on the path only for the second smoke run.
$(FLOORS_STAMP): requirements-floors.txt requirements-floors-extras.txt pyproject.toml
	rm -rf $(FLOORS)
	$(PY) -m venv $(FLOORS)
	$(FLOORS)/bin/python -m pip install --quiet --upgrade pip
	$(FLOORS)/bin/python -m pip install --quiet --only-binary :all: -r requirements-floors.txt \
		pytest pytest-timeout pytest-xdist hypothesis
	$(FLOORS)/bin/python -m pip install --quiet --only-binary :all: --target $(FLOORS)/extras \
		-r requirements-floors-extras.txt
	$(FLOORS)/bin/python -m pip install --quiet --no-deps -e . --config-settings editable_mode=compat
	touch $(FLOORS_STAMP)

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
	$(MAKE) --no-print-directory test-floors

# A smoke subset of the suite on the dependency floors: SQL answers against DuckDB, the
# page encodings, writes without pandas, Arrow results and the client, on the oldest versions.
FLOORS_SMOKE := tests/sql/test_golden.py tests/sql/test_differential.py \
	tests/storage/test_no_pandas.py tests/client tests/sql/test_arrow_results.py \
	tests/sql/test_numpy_params.py tests/storage/cfile/test_encodings.py tests/parser/test_golden.py
FLOORS_EXTRAS_SMOKE := tests/sqlalchemy tests/sql/test_register.py \
	tests/sql/test_arrow_results.py tests/client/test_scanner.py
test-floors: $(FLOORS_STAMP)
	$(FLOORS)/bin/python -m pytest -m "not slow" -n 2 -q $(FLOORS_SMOKE)
	PYTHONPATH=$(CURDIR)/$(FLOORS)/extras $(FLOORS)/bin/python -m pytest \
		-m "not slow" -n 2 -q $(FLOORS_EXTRAS_SMOKE)

# Long suites: hundreds of writer SIGKILLs, millions of simulated Raft steps, the storage
# state machines with thousands of examples and the fast paths' differential tests longer.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -n 2 -q
	KUDUSQL_SM_EXAMPLES=2000 $(BIN)/python -m pytest -q tests/storage/tablet/test_tablet_model.py
	KUDUSQL_SM_EXAMPLES=200 $(BIN)/python -m pytest -q tests/storage/tables/test_database_model.py
	KUDUSQL_DIFF_EXAMPLES=400 $(BIN)/python -m pytest -q tests/sql/test_fast_path_differential.py \
		tests/sql/test_key_write_fastpath.py

# The Spark suite alone (needs Java 17).
test-spark: $(STAMP)
	$(BIN)/python -m pytest -m spark -q

lint: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# YCSB workloads A, B, C, F against kudusql and a throwaway PostgreSQL 15 (needs Debian's
# postgresql-15 package); installs the `bench` extra (psycopg). Options: YCSB_ARGS="--rows 100000".
YCSB_ARGS ?=
bench-ycsb: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]' --config-settings editable_mode=compat
	$(BIN)/python -m benchmarks.ycsb $(YCSB_ARGS)

clean:
	rm -rf $(VENV) $(FLOORS) .pytest_cache .mypy_cache .ruff_cache .hypothesis
