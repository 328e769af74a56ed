# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


# Bootstrap intervals, per group of the dataset's group_column; a panel per model.
rule predict:
    """Test-split predictions, metrics beside the baselines', a predicted-vs-true panel."""
    input:
        model=WORK / "runs/{run}/finetune/model.pt",
        table=run_table("finetune"),
        metadata=staged("metadata.tsv"),
        split=split_of,
        baselines=baselines_of,
    output:
        predictions=in_report(WORK / "runs/{run}/predict/predictions.tsv"),
        metrics=in_report(WORK / "runs/{run}/predict/metrics.json"),
        plot=in_report(figure(WORK / "runs/{run}/predict/predicted_vs_true")),
        provenance=WORK / "runs/{run}/predict/provenance.json",
    log:
        WORK / "logs/predict/{run}.log",
    threads: config["threads"]
    params:
        out_dir=out_dir,
        options=FLAGS.predict,
        scratch=FLAGS.scratch,
    shell:
        "python -m aam --provenance {output.provenance:q} predict --model {input.model:q}"
        " --table {input.table:q} --metadata {input.metadata:q} --split {input.split:q}"
        " --baselines {input.baselines:q}"
        " --subset test --threads {threads} {params.scratch} --output-dir {params.out_dir:q} {params.options}"
        " > {log:q} 2>&1"


# A run and its ensemble members (runs <run>_e<k>): one `aam predict` of all their models.
use rule predict as ensemble with:
    input:
        model=lambda wc: [
            WORK / f"runs/{run}/finetune/model.pt" for run in PLAN.ensembles[wc.run]
        ],
        table=run_table("finetune"),
        metadata=staged("metadata.tsv"),
        split=split_of,
        baselines=baselines_of,
    output:
        predictions=in_report(WORK / "runs/{run}/ensemble/predictions.tsv"),
        metrics=in_report(WORK / "runs/{run}/ensemble/metrics.json"),
        plot=in_report(figure(WORK / "runs/{run}/ensemble/predicted_vs_true")),
        provenance=WORK / "runs/{run}/ensemble/provenance.json",
    log:
        WORK / "logs/ensemble/{run}.log",


# Metrics beside the baselines where the other dataset's target is known; domain_shift.json:
# how its samples differ from the training samples.
rule predict_on:
    """Predictions on another dataset, metrics where its target is known, domain shift."""
    input:
        model=WORK / "runs/{run}/finetune/model.pt",
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        training_table=run_table("finetune"),
        training_split=staged("split.tsv"),
        baselines=lambda wc: WORK
        / f"baselines_on/{RUNS[wc.run]['dataset']}/{wc.dataset}.tsv",
    output:
        predictions=in_report(WORK / "runs/{run}/predict_on/{dataset}/predictions.tsv"),
        metrics=in_report(WORK / "runs/{run}/predict_on/{dataset}/metrics.json"),
        shift=in_report(WORK / "runs/{run}/predict_on/{dataset}/domain_shift.json"),
        provenance=WORK / "runs/{run}/predict_on/{dataset}/provenance.json",
    log:
        WORK / "logs/predict_on/{run}.{dataset}.log",
    threads: config["threads"]
    params:
        out_dir=out_dir,
        options=FLAGS.predict_on,
        scratch=FLAGS.scratch,
    shell:
        "python -m aam --provenance {output.provenance:q} predict --model {input.model:q}"
        " --table {input.table:q} --metadata {input.metadata:q}"
        " --training-table {input.training_table:q} --training-split {input.training_split:q}"
        " --baselines {input.baselines:q} --threads {threads} {params.scratch}"
        " --output-dir {params.out_dir:q} {params.options} > {log:q} 2>&1"


# AAM's gradient x input and the random forest's permutation importance side by side, and a
# heatmap of the top ASVs.
rule importance:
    """Which ASVs carry the signal, for AAM and for the forest, on the test split."""
    input:
        model=WORK / "runs/{run}/finetune/model.pt",
        table=run_table("finetune"),
        metadata=staged("metadata.tsv"),
        split=split_of,
        taxonomy=run_taxonomy,
        metrics=WORK / "runs/{run}/predict/metrics.json",
    output:
        table=in_report(WORK / "runs/{run}/importance/importance.tsv"),
        summary=WORK / "runs/{run}/importance/importance.json",
        plot=in_report(figure(WORK / "runs/{run}/importance/importance")),
        provenance=WORK / "runs/{run}/importance/provenance.json",
    log:
        WORK / "logs/importance/{run}.log",
    threads: config["threads"]
    params:
        out_dir=out_dir,
        options=FLAGS.importance,
        paths=input_flags(taxonomy="taxonomy"),
    shell:
        "python -m aam --provenance {output.provenance:q} importance --model {input.model:q}"
        " --table {input.table:q}"
        " --metadata {input.metadata:q} --split {input.split:q} --metrics {input.metrics:q}"
        " --threads {threads}"
        " --output-dir {params.out_dir:q} {params.options} {params.paths} > {log:q} 2>&1"
