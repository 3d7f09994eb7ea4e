# Quick start: `make run` (the whole chain on the built-in corpus) and `make test`.
# Both create .venv and install what is missing on first use.
PYTHON ?= python3
VENV ?= .venv
# A CPU build of torch by default; `make install TORCH_SPEC=torch` (or a CUDA index) for GPUs.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export KEDRO_DISABLE_TELEMETRY := 1
export DO_NOT_TRACK := 1

.PHONY: install run test test-fast viz lint clean-data

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The tests also cover the optional MLflow tracking, so they install the `mlflow` extra.
TEST_STAMP := $(VENV)/.installed-test
$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,mlflow]"
	touch $(TEST_STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/kedro run $(ARGS)

# Every test, on all cores (at most 4 workers: each one holds its own torch); plain `pytest` runs
# them one by one, which is what to use for a single test. worksteal: an idle worker takes queued tests
# from the other, so neither waits at the end (2 idle cores, one run each: 176 s against 192 s with the default split).
test: $(TEST_STAMP)
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist worksteal $(ARGS)

test-fast: $(TEST_STAMP)
	$(BIN)/python -m pytest -m "not slow" $(ARGS)

viz: $(STAMP)
	$(BIN)/kedro viz run

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts

clean-data:
	find data -mindepth 2 ! -name .gitkeep -delete
