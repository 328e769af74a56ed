# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


localrules:
    stage,
    check_data,
    match_samples,
    rarefy,
    stage_tree,
    split,
    cv_split,
    learning_curve_split,
    new_study_split,


rule stage:
    """Copy a dataset's inputs into the work area, verified, with a sha256 manifest."""
    input:
        table=given("table"),
        metadata=given("metadata"),
        sequences=given("sequences"),
    output:
        table=WORK / "data/{dataset}/table.biom",
        metadata=WORK / "data/{dataset}/metadata.tsv",
        manifest=WORK / "data/{dataset}/manifest.sha256",
        provenance=WORK / "data/{dataset}/provenance.json",
    log:
        WORK / "logs/stage/{dataset}.log",
    params:
        out_dir=out_dir,
        paths=input_flags(sequences="sequences"),
    shell:
        "python -m aam --provenance {output.provenance:q} stage --output-dir {params.out_dir:q}"
        " --table table.biom={input.table:q} --file metadata.tsv={input.metadata:q}"
        " {params.paths} > {log:q} 2>&1"


# Target columns, covariates, split columns, counts, labels, the folds of the runs that
# cross-validate the dataset, the covariate columns of the datasets its runs predict, a sample
# per UniFrac shard. A target of all, scheduled first (priority): bad data stops here, one line
# naming the config field, before a training job can start. No job takes its manifest as an
# input: a rerun of the check alone (its flags or code changed) reruns nothing else (an
# ancient() edge would not do: Snakemake then skips the other reasons of the jobs downstream).
rule check_data:
    """Check a dataset's data against the config (`aam check-data`), first."""
    input:
        table=given("table"),
        metadata=given("metadata"),
        sequences=given("sequences"),
    output:
        manifest=WORK / "data/{dataset}/checked.sha256",
        samples=WORK / "data/{dataset}/samples.json",
        provenance=WORK / "data/{dataset}/checked.provenance.json",
    log:
        WORK / "logs/check_data/{dataset}.log",
    priority: 100
    params:
        options=FLAGS.check_data,
        paths=input_flags(sequences="sequences"),
    shell:
        "python -m aam --provenance {output.provenance:q} check-data"
        " --dataset {wildcards.dataset:q} --table {input.table:q}"
        " --metadata {input.metadata:q} --output {output.manifest:q}"
        " --samples {output.samples:q} {params.options}"
        " {params.paths} > {log:q} 2>&1"


# A dataset with drop_samples_without_metadata: its table without the samples that have no
# metadata row (check_data counts them), which every job of the dataset reads (rarefied first
# where the dataset asks): Plan.unrarefied_table.
rule match_samples:
    """A dataset's table without its samples that have no metadata row."""
    input:
        table=WORK / "data/{dataset}/table.biom",
        metadata=WORK / "data/{dataset}/metadata.tsv",
    output:
        table=WORK / "data/{dataset}/matched.biom",
        provenance=WORK / "data/{dataset}/matched.provenance.json",
    log:
        WORK / "logs/match_samples/{dataset}.log",
    shell:
        "python -m aam --provenance {output.provenance:q} match-samples --table {input.table:q}"
        " --metadata {input.metadata:q} --output {output.table:q} > {log:q} 2>&1"


# Every job of the dataset then reads it (table_of), but the training of a run that draws
# afresh each epoch (rarefy_each_epoch).
rule rarefy:
    """Subsample a dataset's table once, seeded, to its `rarefy:` depth."""
    input:
        table=lambda wc: PLAN.unrarefied_table(wc.dataset),
    output:
        table=WORK / "data/{dataset}/rarefied.biom",
        provenance=WORK / "data/{dataset}/rarefied.provenance.json",
    log:
        WORK / "logs/rarefy/{dataset}.log",
    params:
        options=FLAGS.rarefy,
    shell:
        "python -m aam --provenance {output.provenance:q} rarefy --table {input.table:q}"
        " --output {output.table:q} {params.options} > {log:q} 2>&1"


# A rule of its own, not an output of `stage`: the tree is optional (datasets without one get
# `built_tree.nwk` from rule `tree`), and a rule's outputs cannot depend on the dataset.
rule stage_tree:
    """Copy a dataset's configured tree into the work area (`aam stage`, like `stage`)."""
    input:
        tree=given("tree"),
        sequences=given("sequences"),
    output:
        tree=WORK / "data/{dataset}/tree.nwk",
        manifest=WORK / "data/{dataset}/tree.sha256",
        provenance=WORK / "data/{dataset}/tree.provenance.json",
    log:
        WORK / "logs/stage_tree/{dataset}.log",
    params:
        out_dir=out_dir,
        paths=input_flags(sequences="sequences"),
    shell:
        "python -m aam --provenance {output.provenance:q} stage --output-dir {params.out_dir:q}"
        " --manifest tree.sha256"
        " --tree tree.nwk={input.tree:q} {params.paths} > {log:q} 2>&1"


rule split:
    """Train/validation/test split of the samples with a target: seeded, or the dataset's."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        given=given("split_file"),
    output:
        split=WORK / "data/{dataset}/split.tsv",
        provenance=WORK / "data/{dataset}/split.provenance.json",
    log:
        WORK / "logs/split/{dataset}.log",
    params:
        options=FLAGS.split,
        paths=input_flags(from_file="given"),
    shell:
        "python -m aam --provenance {output.provenance:q} split --table {input.table:q}"
        " --metadata {input.metadata:q} --output {output.split:q} {params.options}"
        " {params.paths} > {log:q} 2>&1"


# Stratified by class for classifiers: the fold's samples `test`, a seeded validation fraction
# (split.val_fraction) of the others `val`, the rest `train`.
use rule split as cv_split with:
    """Fold {fold} of a seeded {folds}-fold partition of the samples with a target."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
    output:
        split=WORK / "data/{dataset}/cv/{folds}x{seed}/fold{fold}.split.tsv",
        provenance=WORK / "data/{dataset}/cv/{folds}x{seed}/fold{fold}.provenance.json",
    log:
        WORK / "logs/cv_split/{dataset}.{folds}x{seed}.fold{fold}.log",
    params:
        options=FLAGS.cv_split,


# Nested across the fractions of one seed; the other samples unused, test unchanged.
rule learning_curve_split:
    """A learning-curve point: a seeded fraction of the split's train and val samples."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/split.tsv",
    output:
        split=WORK / "data/{dataset}/lc/{seed}/{fraction}.split.tsv",
        provenance=WORK / "data/{dataset}/lc/{seed}/{fraction}.provenance.json",
    log:
        WORK / "logs/learning_curve_split/{dataset}.{seed}.{fraction}.log",
    params:
        options=FLAGS.learning_curve_split,
    shell:
        "python -m aam --provenance {output.provenance:q} split --table {input.table:q}"
        " --metadata {input.metadata:q} --from-file {input.split:q} --output {output.split:q}"
        " {params.options} > {log:q} 2>&1"


# The left-out study's pool drawn once (every point's test samples: the rest of the study);
# nested across the sizes of one seed; every other sample unused.
rule new_study_split:
    """A new-study point: {size} labelled samples of the left-out study, drawn with {seed}."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        split=WORK / "data/{dataset}/split.tsv",
    output:
        split=WORK / "data/{dataset}/new_study/{seed}/{size}.split.tsv",
        provenance=WORK / "data/{dataset}/new_study/{seed}/{size}.provenance.json",
    log:
        WORK / "logs/new_study_split/{dataset}.{seed}.{size}.log",
    params:
        options=FLAGS.new_study_split,
    shell:
        "python -m aam --provenance {output.provenance:q} split --table {input.table:q}"
        " --metadata {input.metadata:q} --from-file {input.split:q} --output {output.split:q}"
        " {params.options} > {log:q} 2>&1"
