# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


localrules:
    search_split,


# The search's scoring folds: K folds of the dataset split's train and val samples (its test
# samples unused: no trial reads them), whole groups of split_group_column, by class for
# classifiers; each fold's samples `test`, split.val_fraction of the others `val`.
use rule split as search_split with:
    """Scoring fold {fold} of a search's {folds}-fold partition of the train and val samples."""
    input:
        table=dataset_table,
        metadata=WORK / "data/{dataset}/metadata.tsv",
        given=WORK / "data/{dataset}/split.tsv",
    output:
        split=WORK / "data/{dataset}/search/{folds}x{seed}/fold{fold}.split.tsv",
        provenance=WORK
        / "data/{dataset}/search/{folds}x{seed}/fold{fold}.provenance.json",
    log:
        WORK / "logs/search_split/{dataset}.{folds}x{seed}.fold{fold}.log",
    params:
        options=FLAGS.cv_split,


# Each worker is a job with the run's fine-tuning resources (a GPU on a cluster); the workers
# share one Optuna study in the search's journal (not an output: it outlives a killed worker,
# and a rerun continues it) and stop when the budget is used.
rule search_worker:
    """A worker of run {run}'s search: trials on the scoring folds until the budget is used."""
    input:
        table=run_table("finetune"),
        metadata=staged("metadata.tsv"),
        tree=run_tree,
        split=split_of,
        folds=lambda wc: PLAN.search_folds(wc.run),
    output:
        record=WORK / "runs/{run}/search/workers/{worker}.json",
        provenance=WORK / "runs/{run}/search/workers/{worker}.provenance.json",
    log:
        WORK / "logs/search_worker/{run}.{worker}.log",
    threads: config["threads"]
    params:
        search_dir=lambda wc: PLAN.search_file(wc.run, ""),
        options=FLAGS.search_worker,
    shell:
        "python -m aam --provenance {output.provenance:q} search-worker --table {input.table:q}"
        " --metadata {input.metadata:q} --tree {input.tree:q} --split {input.split:q}"
        " --folds {input.folds:q} --search-dir {params.search_dir:q} --threads {threads}"
        " --output {output.record:q}"
        " {params.options} > {log:q} 2>&1"


rule search_best:
    """Run {run}'s search: the best values (which the run trains with), every trial, a figure."""
    input:
        workers=lambda wc: [
            PLAN.search_file(wc.run, f"workers/{k}.json")
            for k in range(1, PLAN.searches[wc.run]["workers"] + 1)
        ],
    output:
        best=WORK / "runs/{run}/search/best.yaml",
        trials=in_report(WORK / "runs/{run}/search/trials.tsv"),
        summary=WORK / "runs/{run}/search/search.json",
        figure=in_report(figure(WORK / "runs/{run}/search/search")),
    log:
        WORK / "logs/search_best/{run}.log",
    params:
        search_dir=lambda wc: PLAN.search_file(wc.run, ""),
        out_dir=out_dir,
        options=FLAGS.search_best,
    shell:
        "python -m aam search-best --search-dir {params.search_dir:q} --workers {input.workers:q}"
        " --output-dir {params.out_dir:q} {params.options} > {log:q} 2>&1"


# One job: a forest's trials are seconds on the CPU cores; the same folds and ask-lock, its own
# study in the search's journal.
rule search_forest:
    """The random forest's search on run {run}'s folds; its best fitted on the run's train."""
    input:
        table=run_table("finetune"),
        metadata=staged("metadata.tsv"),
        split=split_of,
        folds=lambda wc: PLAN.search_folds(wc.run),
    output:
        predictions=WORK / "runs/{run}/search/forest/predictions.tsv",
        trials=in_report(WORK / "runs/{run}/search/forest/trials.tsv"),
        summary=WORK / "runs/{run}/search/forest/search.json",
        provenance=WORK / "runs/{run}/search/forest/provenance.json",
    log:
        WORK / "logs/search_forest/{run}.log",
    threads: config["threads"]
    params:
        search_dir=lambda wc: PLAN.search_file(wc.run, ""),
        out_dir=out_dir,
        options=FLAGS.search_forest,
    shell:
        "python -m aam --provenance {output.provenance:q} search-forest --table {input.table:q}"
        " --metadata {input.metadata:q}"
        " --split {input.split:q} --folds {input.folds:q} --search-dir {params.search_dir:q}"
        " --threads {threads} --output-dir {params.out_dir:q} {params.options} > {log:q} 2>&1"
