rule baselines:
    """The mean predictor and a random forest on relative abundances, fitted on the training
    samples of the dataset's split; `predict` scores them beside the model."""
    input:
        table=dataset_table,
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
        options=lambda wc: baselines_options(wc.dataset),
    shell:
        "python -m aam --provenance {output.provenance:q} baselines --table {input.table:q}"
        " --metadata {input.metadata:q} --split {input.split:q} --threads {threads}"
        " --output {output.predictions:q} {params.options} > {log:q} 2>&1"


rule subset_baselines:
    """`baselines`, fitted on the training samples of a run's own split: a fold of a
    cross-validation (part cv/<folds>x<seed>/fold<k>) or a learning-curve point
    (lc/<seed>/<fraction>)."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/{part}.split.tsv",
        image=IMAGE_INPUT,
    output:
        predictions=WORK / "baselines/{dataset}/{part}.tsv",
        provenance=WORK / "baselines/{dataset}/{part}.provenance.json",
    log:
        WORK / "logs/subset_baselines/{dataset}/{part}.log",
    benchmark:
        WORK / "benchmarks/subset_baselines/{dataset}/{part}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        code=code("baselines"),
        options=lambda wc: baselines_options(wc.dataset),
    shell:
        "python -m aam --provenance {output.provenance:q} baselines --table {input.table:q}"
        " --metadata {input.metadata:q} --split {input.split:q} --threads {threads}"
        " --output {output.predictions:q} {params.options} > {log:q} 2>&1"


rule baselines_on:
    """The baselines of rule `baselines` (same training samples, trees and seed) predicting
    another dataset's table, on the fitted table's ASVs (`aam baselines --predict-table`).
    """
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/split.tsv",
        other=lambda wc: table_of(wc.other),
        image=IMAGE_INPUT,
    output:
        predictions=WORK / "baselines_on/{dataset}/{other}.tsv",
        provenance=WORK / "baselines_on/{dataset}/{other}.provenance.json",
    log:
        WORK / "logs/baselines_on/{dataset}.{other}.log",
    benchmark:
        WORK / "benchmarks/baselines_on/{dataset}.{other}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        code=code("baselines"),
        options=lambda wc: baselines_options(wc.dataset),
    shell:
        "python -m aam --provenance {output.provenance:q} baselines --table {input.table:q}"
        " --metadata {input.metadata:q} --split {input.split:q} --threads {threads}"
        " --predict-table {input.other:q} --output {output.predictions:q} {params.options}"
        " > {log:q} 2>&1"
