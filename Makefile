# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest-xdist workers for `make test` (tests that share a SLURM cluster or a DAG run stay on
# one worker: xdist_group marks, --dist loadgroup in pyproject.toml).
TEST_WORKERS ?= 2

.PHONY: demo test lint schema venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# The whole DAG on data/demo with the embedded local profile (CPU, no container).
demo: $(STAMP)
	$(BIN)/snakemake all --profile profiles/local
	$(BIN)/snakemake all --profile profiles/local --report results/workflow/report.html
	@echo "predictions: results/workflow/runs/demo/predict/predictions.tsv"
	@echo "metrics (model vs mean predictor): results/workflow/runs/demo/predict/metrics.json"
	@echo "report: results/workflow/report.html"

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check aam tests benchmarks workflow/scripts
	$(BIN)/ruff format --check aam tests benchmarks workflow/scripts
	$(BIN)/snakefmt --check workflow
	$(BIN)/snakemake --profile profiles/local --lint

# workflow/schemas/run_options.schema.json from the flags of `aam pretrain` / `aam finetune`.
schema: $(STAMP)
	$(BIN)/aam run-options-schema

clean:
	rm -rf $(VENV) results .pytest_cache
