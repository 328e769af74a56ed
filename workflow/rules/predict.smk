rule predict:
    """Predictions on the test split; metrics of the model beside the baselines (bootstrap
    intervals; per group of the dataset's group_column), a predicted-vs-true panel per model.
    """
    input:
        model=WORK / "runs/{run}/finetune/model.pt",
        table=run_table("finetune"),
        metadata=staged("metadata.tsv"),
        split=split_of,
        baselines=baselines_of,
        image=IMAGE_INPUT,
    output:
        predictions=report(
            WORK / "runs/{run}/predict/predictions.tsv",
            caption="../report/predictions.rst",
            category=CATEGORY["predictions"],
            subcategory="{run}",
            labels={"run": "{run}", "file": "predictions"},
        ),
        metrics=report(
            WORK / "runs/{run}/predict/metrics.json",
            caption="../report/metrics.rst",
            category=CATEGORY["predictions"],
            subcategory="{run}",
            labels={"run": "{run}", "file": "metrics"},
        ),
        plot=report(
            WORK / "runs/{run}/predict/predicted_vs_true.png",
            caption="../report/predicted_vs_true.rst",
            category=CATEGORY["predictions"],
            subcategory="{run}",
            labels={"run": "{run}", "file": "predicted vs true"},
        ),
        provenance=WORK / "runs/{run}/predict/provenance.json",
    log:
        WORK / "logs/predict/{run}.log",
    benchmark:
        WORK / "benchmarks/predict/{run}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        out_dir=lambda wc, output: Path(output[0]).parent,
        code=code("predict"),
        options=lambda wc: cli_flags(
            {
                "rarefy_depth": rarefied(wc.run),
                "group_column": dataset_of(wc)["group_column"],
                "device": config["device"],
                "scratch": config["scratch"],
            }
        ),
    shell:
        "python -m aam --provenance {output.provenance:q} predict --model {input.model:q}"
        " --table {input.table:q} --metadata {input.metadata:q} --split {input.split:q}"
        " --baselines {input.baselines:q}"
        " --subset test --threads {threads} --output-dir {params.out_dir:q} {params.options}"
        " > {log:q} 2>&1"


rule predict_on:
    """Predictions on every sample of another dataset, metrics beside the baselines where its
    target is known, and how its samples differ from the training samples (domain_shift.json).
    """
    input:
        model=WORK / "runs/{run}/finetune/model.pt",
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        training_table=run_table("finetune"),
        training_split=staged("split.tsv"),
        baselines=lambda wc: WORK
        / f"baselines_on/{RUNS[wc.run]['dataset']}/{wc.dataset}.tsv",
        image=IMAGE_INPUT,
    output:
        predictions=report(
            WORK / "runs/{run}/predict_on/{dataset}/predictions.tsv",
            caption="../report/predictions_on.rst",
            category=CATEGORY["predictions"],
            subcategory="{run} on {dataset}",
            labels={"run": "{run}", "dataset": "{dataset}", "file": "predictions"},
        ),
        metrics=report(
            WORK / "runs/{run}/predict_on/{dataset}/metrics.json",
            caption="../report/metrics_on.rst",
            category=CATEGORY["predictions"],
            subcategory="{run} on {dataset}",
            labels={"run": "{run}", "dataset": "{dataset}", "file": "metrics"},
        ),
        shift=report(
            WORK / "runs/{run}/predict_on/{dataset}/domain_shift.json",
            caption="../report/domain_shift.rst",
            category=CATEGORY["predictions"],
            subcategory="{run} on {dataset}",
            labels={"run": "{run}", "dataset": "{dataset}", "file": "domain shift"},
        ),
        provenance=WORK / "runs/{run}/predict_on/{dataset}/provenance.json",
    log:
        WORK / "logs/predict_on/{run}.{dataset}.log",
    benchmark:
        WORK / "benchmarks/predict_on/{run}.{dataset}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        out_dir=lambda wc, output: Path(output[0]).parent,
        code=code("predict"),
        options=lambda wc: cli_flags(
            {
                "target_column": DATASETS[wc.dataset]["target"],
                "rarefy_depth": rarefied(wc.run),
                "device": config["device"],
                "scratch": config["scratch"],
            }
        ),
    shell:
        "python -m aam --provenance {output.provenance:q} predict --model {input.model:q}"
        " --table {input.table:q} --metadata {input.metadata:q}"
        " --training-table {input.training_table:q} --training-split {input.training_split:q}"
        " --baselines {input.baselines:q} --threads {threads}"
        " --output-dir {params.out_dir:q} {params.options} > {log:q} 2>&1"


rule importance:
    """Which ASVs carry the signal: AAM's gradient x input and the random forest's permutation
    importance on the test split, side by side, and a heatmap of the top ASVs."""
    input:
        model=WORK / "runs/{run}/finetune/model.pt",
        table=run_table("finetune"),
        metadata=staged("metadata.tsv"),
        split=split_of,
        image=IMAGE_INPUT,
    output:
        table=report(
            WORK / "runs/{run}/importance/importance.tsv",
            caption="../report/importance.rst",
            category=CATEGORY["predictions"],
            subcategory="{run}",
            labels={"run": "{run}", "file": "ASV importance"},
        ),
        summary=WORK / "runs/{run}/importance/importance.json",
        plot=report(
            WORK / "runs/{run}/importance/importance.png",
            caption="../report/importance.rst",
            category=CATEGORY["predictions"],
            subcategory="{run}",
            labels={"run": "{run}", "file": "top ASVs"},
        ),
    log:
        WORK / "logs/importance/{run}.log",
    benchmark:
        WORK / "benchmarks/importance/{run}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        out_dir=lambda wc, output: Path(output.table).parent,
        code=code("importance"),
        options=lambda wc: cli_flags(
            {
                "rarefy_depth": rarefied(wc.run),
                "device": config["device"],
                **config["baselines"],
            }
        ),
    shell:
        "python -m aam importance --model {input.model:q} --table {input.table:q}"
        " --metadata {input.metadata:q} --split {input.split:q} --threads {threads}"
        " --output-dir {params.out_dir:q} {params.options} > {log:q} 2>&1"
