rule stage:
    """Copy a dataset's inputs into the work area (verified, with a sha256 manifest), once rule
    check_data passed them (an ancient input: a rerun of the check alone restages nothing).
    """
    input:
        table=lambda wc: DATASETS[wc.dataset]["table"],
        metadata=lambda wc: DATASETS[wc.dataset]["metadata"],
        image=IMAGE_INPUT,
    output:
        table=WORK / "data/{dataset}/table.biom",
        metadata=WORK / "data/{dataset}/metadata.tsv",
        manifest=WORK / "data/{dataset}/manifest.sha256",
        provenance=WORK / "data/{dataset}/provenance.json",
    log:
        WORK / "logs/stage/{dataset}.log",
    benchmark:
        WORK / "benchmarks/stage/{dataset}.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        out_dir=lambda wc, output: Path(output[0]).parent,
        code=code("stage"),
    shell:
        "python -m aam --provenance {output.provenance:q} stage --output-dir {params.out_dir:q}"
        " --file table.biom={input.table:q} --file metadata.tsv={input.metadata:q} > {log:q} 2>&1"


rule check_data:
    """Check a dataset's data against the config (`aam check-data`):
    target, covariate and split columns, counts, labels, the folds of the runs that
    cross-validate it, the covariate columns of the datasets its runs predict, a sample per
    UniFrac shard.
    A target of all, scheduled first (priority): bad data stops here, one line naming the
    config field, before a training job can start. No job takes its manifest as an input: a
    rerun of the check alone (its flags or code changed) reruns nothing else (an ancient()
    edge would not do: Snakemake then skips the other reasons of the jobs downstream).
    """
    input:
        table=lambda wc: DATASETS[wc.dataset]["table"],
        metadata=lambda wc: DATASETS[wc.dataset]["metadata"],
        image=IMAGE_INPUT,
    output:
        manifest=WORK / "data/{dataset}/checked.sha256",
    log:
        WORK / "logs/check_data/{dataset}.log",
    benchmark:
        WORK / "benchmarks/check_data/{dataset}.tsv"
    priority: 100
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("check-data"),
        options=lambda wc: PLAN.data_checks[wc.dataset],
    shell:
        "python -m aam check-data --dataset {wildcards.dataset:q} --table {input.table:q}"
        " --metadata {input.metadata:q} --output {output.manifest:q} {params.options}"
        " > {log:q} 2>&1"


rule rarefy:
    """Subsample every sample of a dataset's staged table once to the depth its config asks
    (`rarefy:`), seeded; every job of the dataset then reads it (table_of), but the training
    of a run that draws afresh each epoch."""
    input:
        table=WORK / "data/{dataset}/table.biom",
        image=IMAGE_INPUT,
    output:
        table=WORK / "data/{dataset}/rarefied.biom",
    log:
        WORK / "logs/rarefy/{dataset}.log",
    benchmark:
        WORK / "benchmarks/rarefy/{dataset}.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("rarefy"),
        options=lambda wc: cli_flags(
            {
                "rarefy_depth": DATASETS[wc.dataset]["rarefy"]["depth"],
                "seed": DATASETS[wc.dataset]["rarefy"]["seed"],
            }
        ),
    shell:
        "python -m aam rarefy --table {input.table:q} --output {output.table:q} {params.options}"
        " > {log:q} 2>&1"


rule stage_tree:
    """Copy a dataset's configured tree into the work area (`aam stage`, like rule `stage`).

    A rule of its own, not an output of `stage`: the tree is optional (datasets without one get
    `built_tree.nwk` from rule `tree`), and a rule's outputs cannot depend on the dataset.
    """
    input:
        tree=lambda wc: DATASETS[wc.dataset]["tree"],
        image=IMAGE_INPUT,
    output:
        tree=WORK / "data/{dataset}/tree.nwk",
        manifest=WORK / "data/{dataset}/tree.sha256",
    log:
        WORK / "logs/stage_tree/{dataset}.log",
    benchmark:
        WORK / "benchmarks/stage_tree/{dataset}.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        out_dir=lambda wc, output: Path(output[0]).parent,
        code=code("stage"),
    shell:
        "python -m aam stage --output-dir {params.out_dir:q} --manifest tree.sha256"
        " --tree tree.nwk={input.tree:q} > {log:q} 2>&1"


rule split:
    """Train/validation/test split of the samples that have a target value: seeded, or the
    dataset's own (split_column / split_file), validated."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        given=lambda wc: DATASETS[wc.dataset]["split_file"] or [],
        image=IMAGE_INPUT,
    output:
        split=WORK / "data/{dataset}/split.tsv",
    log:
        WORK / "logs/split/{dataset}.log",
    benchmark:
        WORK / "benchmarks/split/{dataset}.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("split"),
        options=lambda wc, input: cli_flags(
            {
                "target_column": DATASETS[wc.dataset]["target"],
                "classifier": DATASETS[wc.dataset]["classifier"],
                "from_column": DATASETS[wc.dataset]["split_column"],
                "from_file": input.given or None,
                **config["split"],
            }
        ),
    shell:
        "python -m aam split --table {input.table:q} --metadata {input.metadata:q}"
        " --output {output.split:q} {params.options} > {log:q} 2>&1"


rule cv_split:
    """Fold {fold} of a seeded {folds}-fold partition of the samples that have a target
    (stratified by class for classifiers): the fold's samples `test`, a seeded validation
    fraction (split.val_fraction) of the others `val`, the rest `train`."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        image=IMAGE_INPUT,
    output:
        split=WORK / "data/{dataset}/cv/{folds}x{seed}/fold{fold}.split.tsv",
    log:
        WORK / "logs/cv_split/{dataset}.{folds}x{seed}.fold{fold}.log",
    benchmark:
        WORK / "benchmarks/cv_split/{dataset}.{folds}x{seed}.fold{fold}.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("split"),
        options=lambda wc: cli_flags(
            {
                "target_column": DATASETS[wc.dataset]["target"],
                "classifier": DATASETS[wc.dataset]["classifier"],
                "folds": wc.folds,
                "fold": wc.fold,
                "seed": wc.seed,
                "val_fraction": config["split"]["val_fraction"],
            }
        ),
    shell:
        "python -m aam split --table {input.table:q} --metadata {input.metadata:q}"
        " --output {output.split:q} {params.options} > {log:q} 2>&1"


rule learning_curve_split:
    """A learning-curve point of the dataset's split: a seeded fraction of its train and of its
    val samples (nested across fractions of one seed), the others unused, test unchanged.
    """
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/split.tsv",
        image=IMAGE_INPUT,
    output:
        split=WORK / "data/{dataset}/lc/{seed}/{fraction}.split.tsv",
    log:
        WORK / "logs/learning_curve_split/{dataset}.{seed}.{fraction}.log",
    benchmark:
        WORK / "benchmarks/learning_curve_split/{dataset}.{seed}.{fraction}.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("split"),
        options=lambda wc: cli_flags(
            {
                "target_column": DATASETS[wc.dataset]["target"],
                "classifier": DATASETS[wc.dataset]["classifier"],
                "train_fraction": wc.fraction,
                "seed": wc.seed,
            }
        ),
    shell:
        "python -m aam split --table {input.table:q} --metadata {input.metadata:q}"
        " --from-file {input.split:q} --output {output.split:q} {params.options} > {log:q} 2>&1"
