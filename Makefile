# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest-xdist workers for `make test` (tests that share a SLURM cluster or a DAG run stay on
# one worker: xdist_group marks, --dist loadgroup in pyproject.toml). Three on CI's 2 cores:
# the SLURM group's worker mostly waits on the executor plugin's status polling (tests/README.md).
TEST_WORKERS ?= 3

.PHONY: demo test test-fast test-faults test-extended lint schema venv clean gpu-check gpu-wheels \
	overview-screenshot

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
	@echo "metrics (AAM beside the baselines): results/workflow/runs/demo/predict/metrics.json"
	@echo "landing page (open it first): results/workflow/overview.html"
	@echo "report: results/workflow/report.html"

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# The edit loop: the suite without the tiers that start a SLURM cluster, run Snakemake or take
# long (markers in pyproject.toml; `make test` runs them all).
FAST_TIERS := not slurm and not workflow and not slow and not gpu and not faults and not extended
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m '$(FAST_TIERS)' --durations=5

# The fault-injection tier (tests/faults/, docs/reliability.md): full disks, I/O errors and
# kills at every write point of every writing command, kills during training and of the
# workflow. Run by .ci/run beside `make test`.
test-faults: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m faults tests/faults

# The extended runs (marker `extended`; what they are: tests/README.md, "Tiers"): the CPU that
# `make test`'s 8-minute budget on 2 cores cannot hold. Two workers: the DAG runs and the SLURM
# site runs (mostly the plugin's status polling) side by side. Run by .ci/run beside `make test`.
test-extended: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m extended

lint: $(STAMP)
	$(BIN)/ruff check aam tests benchmarks tools workflow/scripts
	$(BIN)/ruff format --check aam tests benchmarks tools workflow/scripts
	$(BIN)/snakefmt --check workflow
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/snakemake --profile profiles/local --lint
	$(BIN)/mkdocs build --strict --quiet --site-dir results/site

# docs/overview.png: the demo's landing page (after `make demo`) in headless Chromium.
overview-screenshot:
	chromium-headless-shell --no-sandbox --disable-gpu --hide-scrollbars \
		--window-size=1280,2600 --screenshot=$(CURDIR)/docs/overview.png \
		file://$(CURDIR)/results/workflow/overview.html

# workflow/schemas/run_options.schema.json from the flags of `aam pretrain` / `aam finetune`.
schema: $(STAMP)
	$(BIN)/aam run-options-schema

# `make gpu-check` on a GPU node (CUDA or ROCm), no network: the `gpu` tests, one report in
# GPU_CHECK_OUT. GPU_PYTHON: a python with the machine's torch; what it lacks is installed into
# GPU_VENV from the wheelhouse parts carried in (`make gpu-wheels`). GPU_CHECK_DEVICE=cpu: a dry
# run of the plumbing on the CPU (never a GPU pass). GPU_CHECKS: a subset of the checks.
GPU_PYTHON ?= python3
GPU_VENV ?= .venv-gpu
GPU_CHECK_OUT ?= results/gpu-check
GPU_CHECK_DEVICE ?= cuda
GPU_CHECKS ?= golden unifrac training auto_batch doctor profile throughput
WHEELHOUSE ?= wheelhouse
# `make gpu-wheels`: wheels for linux x86_64 CPython GPU_PYTHON_VERSION, in parts of at most
# GPU_CARRY_MIB each (one carry to the GPU machine).
GPU_PYTHON_VERSION ?= 3.11
GPU_CARRY_MIB ?= 60

gpu-check:
	@$(GPU_PYTHON) tools/gpu_env.py run --device $(GPU_CHECK_DEVICE) --out $(GPU_CHECK_OUT) \
		--venv $(GPU_VENV) --wheelhouse $(WHEELHOUSE) --checks $(GPU_CHECKS)

gpu-wheels: $(STAMP)
	$(BIN)/python tools/gpu_env.py wheels --dest $(WHEELHOUSE) \
		--python-version $(GPU_PYTHON_VERSION) --carry-mib $(GPU_CARRY_MIB)

clean:
	rm -rf $(VENV) results .pytest_cache
