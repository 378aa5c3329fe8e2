# attnmt — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
ARGS ?=
PYTEST_ARGS ?=
# make test runs the suite in TEST_WORKERS processes (pytest-xdist; CI has 2 cores), a test
# file's tests in one process (--dist loadfile), the files in collection order, which puts the
# longest first (tests/conftest.py); TEST_WORKERS=0 runs it in this one
TEST_WORKERS ?= 2
PYTEST = $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# make results: runs each results study (configs/study/<name>.yaml) through experiments/sweep.py
# for at most RESULTS_HOURS (0 = until done), keeping its finished runs in results/<name>/, then
# make results-docs (ARGS="--jobs 2": two runs at once, one thread each)
RESULTS_HOURS ?= 0
RESULTS_STUDIES = results_main results_attention results_attention_reference \
	results_attention_transformer results_attention_preset

.DEFAULT_GOAL := help
.PHONY: help setup data train test test-fast lint format tensorboard serve benchmark results results-docs clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

setup: $(STAMP) ## create .venv: torch (CPU build here) first, then attnmt[dev]; quick when done

data: setup ## prepare the default corpus (ding_de_en, shipped: no download); print pairs per split
	$(PY) scripts/prepare_data.py $(ARGS)

train: setup ## prepare the default corpus and train model=transformer (ARGS="key=value ...")
	$(PY) train.py model=transformer $(ARGS)

test: setup ## run the test suite, slow end-to-end tests included (PYTEST_ARGS to narrow)
	$(PYTEST) $(PYTEST_ARGS)

test-fast: setup ## run the test suite without the slow tests
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

lint: setup ## ruff check and format check, then mypy over all but tests/ ([tool.mypy] in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: setup ## ruff autofix and format
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

tensorboard: setup ## serve the dashboards of every run under outputs/ on 127.0.0.1 (PORT=6006)
	$(VENV)/bin/tensorboard --logdir outputs --host 127.0.0.1 --port $${PORT:-6006}

serve: setup ## the translation page and JSON API on 127.0.0.1 (CKPT=run or .pt, PORT=8000, ARGS)
	@test -n "$(CKPT)" || { echo "make serve: give a checkpoint, e.g. make serve CKPT=outputs/<run>"; exit 2; }
	$(PY) serve.py ckpt=$(CKPT) port=$${PORT:-8000} $(ARGS)

benchmark: setup ## speed and memory benchmarks (python -m benchmarks.benchmark)
	$(PY) -m benchmarks.benchmark $(ARGS)

results: setup ## run the results studies (RESULTS_HOURS each), keep their runs, then make results-docs
	$(foreach s,$(RESULTS_STUDIES),$(PY) -m experiments.sweep configs/study/$(s).yaml \
		--hours $(RESULTS_HOURS) --record $(ARGS) &&) true
	$(MAKE) results-docs

results-docs: setup ## docs/results.md, attention.md, alignment.md from results/
	$(PY) -m experiments.results_table docs
	$(PY) -m experiments.attention_guide
	$(PY) -m experiments.alignment_aer table

clean: ## remove caches and outputs/ (keeps data/ and .venv)
	rm -rf outputs/* multirun .pytest_cache .ruff_cache .mypy_cache .hypothesis
	find . -name __pycache__ -type d -prune -not -path './.venv/*' -exec rm -rf {} +
