rule pretrain:
    """Self-supervised base: UniFrac distances + masked nucleotides (resumes from checkpoints)."""
    input:
        table=lambda wc: staged("table.biom", wc),
        unifrac=lambda wc: WORK / f"unifrac/{RUNS[wc.run]['dataset']}.{METRIC}.h5",
        split=lambda wc: staged("split.tsv", wc),
        image=IMAGE_INPUT,
    output:
        encoder=WORK / "runs/{run}/pretrain/encoder.pt",
        history=report(
            WORK / "runs/{run}/pretrain/history.tsv",
            caption="../report/history.rst",
            category="Training",
            subcategory="{run}",
            labels={"run": "{run}", "stage": "pretrain", "file": "history"},
        ),
        provenance=WORK / "runs/{run}/pretrain/provenance.json",
    log:
        WORK / "logs/pretrain/{run}.log",
    benchmark:
        WORK / "benchmarks/pretrain/{run}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        out_dir=lambda wc, output: Path(output[0]).parent,
        code=code("pretrain"),
        launcher=lambda wc, resources: launcher(resources.get("gpu", 0)),
        scratch=cli_flags({"scratch": config["scratch"]}),
        options=lambda wc: cli_flags(
            {
                "device": config["device"],
                **RUNS[wc.run]["model"],
                **RUNS[wc.run]["pretrain"],
            }
        ),
    shell:
        "{params.launcher} -m aam --provenance {output.provenance:q} pretrain --table {input.table:q}"
        " --unifrac {input.unifrac:q} --split {input.split:q} --threads {threads} --no-progress {params.scratch}"
        " --output-dir {params.out_dir:q} {params.options} > {log:q} 2>&1"


rule finetune:
    """Fine-tune on the dataset's target from a pretrained encoder."""
    input:
        table=lambda wc: staged("table.biom", wc),
        metadata=lambda wc: staged("metadata.tsv", wc),
        unifrac=lambda wc: WORK / f"unifrac/{RUNS[wc.run]['dataset']}.{METRIC}.h5",
        split=lambda wc: staged("split.tsv", wc),
        encoder=lambda wc: WORK / f"runs/{encoder_run(wc)}/pretrain/encoder.pt",
        image=IMAGE_INPUT,
    output:
        model=WORK / "runs/{run}/finetune/model.pt",
        history=report(
            WORK / "runs/{run}/finetune/history.tsv",
            caption="../report/history.rst",
            category="Training",
            subcategory="{run}",
            labels={"run": "{run}", "stage": "finetune", "file": "history"},
        ),
        provenance=WORK / "runs/{run}/finetune/provenance.json",
    log:
        WORK / "logs/finetune/{run}.log",
    benchmark:
        WORK / "benchmarks/finetune/{run}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        out_dir=lambda wc, output: Path(output[0]).parent,
        code=code("finetune"),
        scratch=cli_flags({"scratch": config["scratch"]}),
        target=lambda wc: dataset_of(wc)["target"],
        covariates=lambda wc: cli_flags(
            {"categorical_columns": ",".join(dataset_of(wc)["categorical"]) or None}
        ),
        classifier=lambda wc: "--classifier" if dataset_of(wc)["classifier"] else "",
        options=lambda wc: cli_flags(
            {
                "device": config["device"],
                **RUNS[wc.run]["model"],
                **RUNS[wc.run]["finetune"],
            }
        ),
    shell:
        "python -m aam --provenance {output.provenance:q} finetune --table {input.table:q}"
        " --metadata {input.metadata:q} --target-column {params.target:q} {params.covariates}"
        " {params.classifier} --unifrac {input.unifrac:q} --split {input.split:q}"
        " --pretrained-encoder {input.encoder:q} --threads {threads} --no-progress {params.scratch}"
        " --output-dir {params.out_dir:q} {params.options} > {log:q} 2>&1"


rule plot_history:
    """Training curves for the report."""
    input:
        history=WORK / "runs/{run}/{stage}/history.tsv",
        image=IMAGE_INPUT,
    output:
        report(
            WORK / "runs/{run}/{stage}/history.png",
            caption="../report/curves.rst",
            category="Training",
            subcategory="{run}",
            labels={"run": "{run}", "stage": "{stage}", "file": "curves"},
        ),
    log:
        WORK / "logs/plot_history/{run}.{stage}.log",
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("plot-history"),
    shell:
        "python -m aam plot-history --history {input.history:q} --output {output:q} > {log:q} 2>&1"
