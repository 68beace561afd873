# Each target bootstraps .venv when it is missing, so a fresh machine needs only `make demo` or `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.nclab-installed
EXTRAS  := io,parquet,tensorboard,wandb,mlflow,lightning,hf,ann,pandas,sweep

.PHONY: demo test examples bench mutants lint venv clean docs typecheck wheel-check

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# the CPU build of torch: plain `torch` would pull GBs of CUDA packages
	$(BIN)/python -m pip install -q torch==2.13.0
	# every extra, and the development tools (a PEP 735 dependency group: not in the published metadata)
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]' --group dev
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/nclab demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/python -m pytest -q

# each example asserts its own results (tests/test_examples.py runs them too, so `make test` covers them)
examples: $(STAMP)
	$(BIN)/python examples/own_loop.py
	$(BIN)/python examples/measure_saved_features.py
	$(BIN)/python examples/lightning_digits.py
	$(BIN)/python examples/hf_text.py
	$(BIN)/python examples/lm_tokens.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_stats.py --loop-reference
	$(BIN)/python benchmarks/bench_metrics.py
	$(BIN)/python benchmarks/bench_train.py
	$(BIN)/python benchmarks/bench_monitor.py
	$(BIN)/python benchmarks/bench_ufm.py --small
	$(BIN)/python benchmarks/bench_geometry.py
	$(BIN)/python benchmarks/bench_gpu.py

# mutation testing of the core numerical modules (docs/testing.md); a sample, not part of `make test`
MUTANTS_ARGS ?= --per-package 15 --seed 0
mutants: $(STAMP)
	$(BIN)/python benchmarks/mutants.py $(MUTANTS_ARGS)

# the documentation site, from scratch, offline, warnings as errors (the gallery's examples run: ~1 min of CPU)
DOCS_GENERATED := docs/_build docs/api docs/auto_examples docs/sg_execution_times.rst
docs: $(STAMP)
	rm -rf $(DOCS_GENERATED)
	OMP_NUM_THREADS=1 $(BIN)/python -m sphinx -W --keep-going -E -a -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

# mypy over src/nclab ([tool.mypy] in pyproject.toml: strict on stats, metrics, geometry, io, validation); fails on
# any error (CI runs it, .ci/run)
typecheck: $(STAMP)
	$(BIN)/mypy

# build the wheel, install it into a fresh venv, run `nclab --version` and a small measurement outside the tree
wheel-check: $(STAMP)
	.ci/wheel_check.sh $(BIN)/python

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check src tests benchmarks examples

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache .mypy_cache $(DOCS_GENERATED)
