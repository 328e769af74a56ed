rule predict:
    """Predictions on the test split; metrics of the model beside the baselines (bootstrap
    intervals), and a predicted-vs-true panel per model."""
    input:
        model=WORK / "runs/{run}/finetune/model.pt",
        table=staged("table.biom"),
        metadata=staged("metadata.tsv"),
        split=split_of,
        baselines=baselines_of,
        image=IMAGE_INPUT,
    output:
        predictions=report(
            WORK / "runs/{run}/predict/predictions.tsv",
            caption="../report/predictions.rst",
            category="Predictions",
            subcategory="{run}",
            labels={"run": "{run}", "file": "predictions"},
        ),
        metrics=report(
            WORK / "runs/{run}/predict/metrics.json",
            caption="../report/metrics.rst",
            category="Predictions",
            subcategory="{run}",
            labels={"run": "{run}", "file": "metrics"},
        ),
        plot=report(
            WORK / "runs/{run}/predict/predicted_vs_true.png",
            caption="../report/predicted_vs_true.rst",
            category="Predictions",
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
        options=cli_flags({"device": config["device"], "scratch": config["scratch"]}),
    shell:
        "python -m aam --provenance {output.provenance:q} predict --model {input.model:q}"
        " --table {input.table:q} --metadata {input.metadata:q} --split {input.split:q}"
        " --baselines {input.baselines:q}"
        " --subset test --threads {threads} --output-dir {params.out_dir:q} {params.options}"
        " > {log:q} 2>&1"
