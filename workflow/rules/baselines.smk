# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


# The forest on relative abundances; `predict` scores them beside the model.
rule baselines:
    """Mean, group-mean and random-forest baselines, fitted on the split's training samples."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/split.tsv",
    output:
        predictions=WORK / "baselines/{dataset}.tsv",
        provenance=WORK / "baselines/{dataset}.provenance.json",
    log:
        WORK / "logs/baselines/{dataset}.log",
    threads: config["threads"]
    params:
        options=FLAGS.baselines,
        paths=input_flags(pooled_split="pooled"),
    shell:
        "python -m aam --provenance {output.provenance:q} baselines --table {input.table:q}"
        " --metadata {input.metadata:q} --split {input.split:q} --threads {threads}"
        " --output {output.predictions:q} {params.options} {params.paths} > {log:q} 2>&1"


# Part cv/<folds>x<seed>/fold<k> (a fold of a cross-validation), lc/<seed>/<fraction> (a
# learning-curve point) or new_study/<seed>/<size> (a new-study point: its forest fitted on
# the other studies' labels too, those of the dataset's split).
use rule baselines as subset_baselines with:
    """`baselines`, fitted on the training samples of a run's own split."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/{part}.split.tsv",
        pooled=lambda wc: PLAN.pooled_split(wc.dataset, wc.part),
    output:
        predictions=WORK / "baselines/{dataset}/{part}.tsv",
        provenance=WORK / "baselines/{dataset}/{part}.provenance.json",
    log:
        WORK / "logs/subset_baselines/{dataset}/{part}.log",


# Same training samples, trees and seed as rule `baselines`; on the fitted table's ASVs.
rule baselines_on:
    """The baselines predicting another dataset's table (`aam baselines --predict-table`)."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/split.tsv",
        other=lambda wc: table_of(wc.other),
    output:
        predictions=WORK / "baselines_on/{dataset}/{other}.tsv",
        provenance=WORK / "baselines_on/{dataset}/{other}.provenance.json",
    log:
        WORK / "logs/baselines_on/{dataset}.{other}.log",
    threads: config["threads"]
    params:
        options=FLAGS.baselines,
    shell:
        "python -m aam --provenance {output.provenance:q} baselines --table {input.table:q}"
        " --metadata {input.metadata:q} --split {input.split:q} --threads {threads}"
        " --predict-table {input.other:q} --output {output.predictions:q} {params.options}"
        " > {log:q} 2>&1"


# Beside the forest on abundances: does the representation pretraining learned carry more?
rule embedding_forest:
    """Forests on a run's pretrained sample embeddings (+ abundances), fitted on its train split."""
    input:
        encoder=encoder_of,
        table=lambda wc: table_of(RUNS[wc.run]["dataset"]),
        metadata=staged("metadata.tsv"),
        split=split_of,
    output:
        predictions=WORK / "runs/{run}/embedding_forest/predictions.tsv",
        provenance=WORK / "runs/{run}/embedding_forest/provenance.json",
    log:
        WORK / "logs/embedding_forest/{run}.log",
    threads: config["threads"]
    params:
        options=FLAGS.embedding_forest,
    shell:
        "python -m aam --provenance {output.provenance:q} embedding-forest"
        " --encoder {input.encoder:q} --table {input.table:q} --metadata {input.metadata:q}"
        " --split {input.split:q} --threads {threads} --output {output.predictions:q}"
        " {params.options} > {log:q} 2>&1"
