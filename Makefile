# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Until the Snakemake workflow lands, the demo runs the stages that exist: UniFrac on the demo data.
demo: $(STAMP)
	$(BIN)/aam unifrac --table data/demo/table.biom --tree data/demo/tree.nwk \
	  --metric unweighted --metric weighted_normalized --metric weighted_unnormalized \
	  --output results/demo/unifrac.{metric}.h5
	@echo "UniFrac matrices: results/demo/unifrac.*.h5"

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check aam tests benchmarks
	$(BIN)/ruff format --check aam tests benchmarks

clean:
	rm -rf $(VENV) results .pytest_cache
