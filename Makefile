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

# Until the Snakemake workflow lands, the demo chains the stages by hand on data/demo (CPU).
DEMO := results/demo
DEMO_MODEL := --embedding-dim 64 --attention-heads 4 --layers 2 --max-bp 100 --token-limit 256 \
	--batch-size 16 --no-progress
demo: $(STAMP)
	$(BIN)/aam split --table data/demo/table.biom --metadata data/demo/metadata.tsv \
	  --target-column age --output $(DEMO)/split.tsv
	$(BIN)/aam unifrac --table data/demo/table.biom --tree data/demo/tree.nwk \
	  --metric unweighted --output $(DEMO)/unifrac.unweighted.h5
	$(BIN)/aam pretrain --table data/demo/table.biom --unifrac $(DEMO)/unifrac.unweighted.h5 \
	  --split $(DEMO)/split.tsv --output-dir $(DEMO)/pretrain $(DEMO_MODEL) --epochs 6 --lr 5e-4
	$(BIN)/aam train --table data/demo/table.biom --metadata data/demo/metadata.tsv \
	  --target-column age --categorical-columns qiita_study_id --split $(DEMO)/split.tsv \
	  --pretrained-encoder $(DEMO)/pretrain/encoder.pt --unifrac $(DEMO)/unifrac.unweighted.h5 \
	  --output-dir $(DEMO)/finetune $(DEMO_MODEL) --epochs 12
	$(BIN)/aam predict --model $(DEMO)/finetune/model.pt --table data/demo/table.biom \
	  --metadata data/demo/metadata.tsv --split $(DEMO)/split.tsv --output-dir $(DEMO)/predict
	@echo "predictions: $(DEMO)/predict/predictions.tsv"
	@echo "metrics (model vs mean baseline): $(DEMO)/predict/metrics.json"

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check aam tests benchmarks
	$(BIN)/ruff format --check aam tests benchmarks

clean:
	rm -rf $(VENV) results .pytest_cache
