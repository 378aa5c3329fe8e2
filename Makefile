# attnmt — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
ARGS ?=
PYTEST_ARGS ?=
# make results: seeds and per-run budgets (minutes) of the README's tables; RESULTS_QUICK=1
# is a smoke run (5 updates a run, seeds 1,2, into outputs/results-quick, README untouched)
ifeq ($(RESULTS_QUICK),1)
RESULTS_DIR ?= outputs/results-quick
RESULTS_SEEDS ?= 1,2
RESULTS_TOY := trainer.max_steps=5 trainer.val_every_steps=5 trainer.val_subset=20 \
  trainer.num_heatmaps=0 decode.max_len_a=0.5 decode.max_len_b=5
endif
RESULTS_DIR ?= outputs/results
RESULTS_SEEDS ?= 1,2,3
RESULTS_BUDGET ?= 12
RESULTS_ATTN_BUDGET ?= 3
# RESULTS_PARTS=main: the presets' table only; with RESULTS_SEEDS=1 that is 6 runs (~80 min)
RESULTS_PARTS ?= main attention
DO_MAIN = $(filter main,$(RESULTS_PARTS))
DO_ATTN = $(filter attention,$(RESULTS_PARTS))
RESULTS_MAIN = experiment=results_main hydra.sweep.dir=$(RESULTS_DIR)/main seed=$(RESULTS_SEEDS) \
  trainer.time_budget_min=$(RESULTS_BUDGET) $(RESULTS_TOY) $(ARGS)
RESULTS_ATTN = experiment=results_attention hydra.sweep.dir=$(RESULTS_DIR)/attention \
  trainer.time_budget_min=$(RESULTS_ATTN_BUDGET) $(RESULTS_TOY) $(ARGS)
RESULTS_README = $(if $(filter 1,$(RESULTS_QUICK)),,--readme README.md)

.DEFAULT_GOAL := help
.PHONY: help setup data train test test-fast lint format tensorboard serve benchmark results clean

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
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: setup ## run the test suite without the slow tests
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

lint: setup ## ruff check and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

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

results: setup ## train and write README's results tables (~6 h; RESULTS_QUICK=1: smoke run)
	@if [ "$(RESULTS_QUICK)" = 1 ] && [ "$(RESULTS_DIR)" = outputs/results-quick ]; then rm -rf $(RESULTS_DIR); fi
	$(PY) -m benchmarks.results_table plan $(RESULTS_README) $(if $(DO_MAIN),--sweep "$(RESULTS_MAIN)") \
	  $(if $(DO_ATTN),--sweep "$(RESULTS_ATTN)")
	$(if $(DO_MAIN),-$(PY) train.py -m $(RESULTS_MAIN))
	$(if $(DO_ATTN),-$(PY) train.py -m $(RESULTS_ATTN))
	$(PY) -m benchmarks.results_table table $(if $(DO_MAIN),--main $(RESULTS_DIR)/main) \
	  $(if $(DO_ATTN),--attention $(RESULTS_DIR)/attention) --out $(RESULTS_DIR)/results $(RESULTS_README)

clean: ## remove caches and outputs/ (keeps data/ and .venv)
	rm -rf outputs/* multirun .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -not -path './.venv/*' -exec rm -rf {} +
