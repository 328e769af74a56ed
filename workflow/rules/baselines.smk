rule baselines:
    """The mean predictor and a random forest on relative abundances, fitted on the training
    samples of the dataset's split; `predict` scores them beside the model."""
    input:
        table=WORK / "data/{dataset}/table.biom",
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/split.tsv",
        image=IMAGE_INPUT,
    output:
        predictions=WORK / "baselines/{dataset}.tsv",
        provenance=WORK / "baselines/{dataset}.provenance.json",
    log:
        WORK / "logs/baselines/{dataset}.log",
    benchmark:
        WORK / "benchmarks/baselines/{dataset}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        code=code("baselines"),
        options=lambda wc: cli_flags(
            {
                "target_column": DATASETS[wc.dataset]["target"],
                "classifier": DATASETS[wc.dataset]["classifier"],
                **config["baselines"],
            }
        ),
    shell:
        "python -m aam --provenance {output.provenance:q} baselines --table {input.table:q}"
        " --metadata {input.metadata:q} --split {input.split:q} --threads {threads}"
        " --output {output.predictions:q} {params.options} > {log:q} 2>&1"
