# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code; not the scripts summary and leaderboard), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


localrules:
    profiling_report,
    overview,
    summary,
    leaderboard,
    learning_curve,
    new_study,
    cross_validation,


SWEEP_RUNS = PLAN.sweep_runs
# summary.py's runs: name, dataset, target, its unit and the metrics' units of each.
SUMMARY_RUNS = [
    {
        "run": run,
        "dataset": dataset,
        "target": DATASETS[dataset]["target"],
        "target_unit": DATASETS[dataset]["target_unit"],
    }
    for run, dataset, _ in PLAN.scored
]
SCORED = [
    metrics for _, _, metrics in PLAN.scored
]  # every run's and ensemble's metrics.json
COUNTED = [
    WORK / f"data/{dataset}/samples.json"
    for dataset in sorted({d for _, d, _ in PLAN.scored})
]  # how each scored dataset's table and metadata met (rule check_data), on the page


# Top kernels, time by category, memory and samples/s per batch size with a recommended batch
# size, attention backends, and every rule's wall time and peak RSS.
rule profiling_report:
    """One HTML page of the profiled run's kernels, memory, speed and rule benchmarks."""
    input:
        profile=WORK / f"profiling/{PLAN.profile_run}/kernel_stats.csv",
        benchmarks=PLAN.profiling_benchmarks(),
    output:
        in_report(WORK / "profiling/report.html"),
    log:
        WORK / "logs/profiling_report/report.log",
    shell:
        'python -m aam profiling-report --profile-dir "$(dirname {input.profile:q})"'
        " --benchmarks {input.benchmarks:q} --output {output:q} > {log:q} 2>&1"


# Every run's test metrics beside the baselines' with their intervals, AAM minus each baseline
# (paired intervals) with a verdict, the output folders. The config files are shown whole with
# their digest: not inputs (a copy would rerun it), relative paths (so is a moved one), and
# their digests a param (an edit of their text reruns the page, whatever it changes).
rule overview:
    """The landing page (results, figures, provenance, files), made last: it lists what exists."""
    input:
        SCORED
        + COUNTED
        + [p for p in get_final_output() if p != WORK / "overview.html"],
    output:
        page=in_report(WORK / "overview.html"),
        versions=in_report(WORK / "software_versions.tsv"),
        citations=WORK / "citations.bib",
    log:
        WORK / "logs/overview/overview.log",
    params:
        options=FLAGS.overview,
        config=[os.path.relpath(path) for path in workflow.configfiles],
        config_sha256=digests(workflow.configfiles),
    shell:
        "python -m aam overview {params.options} --config {params.config:q}"
        " --output {output.page:q} --versions {output.versions:q}"
        " --citations {output.citations:q} > {log:q} 2>&1"


rule summary:
    """Every run's test-split metrics beside the baselines', one TSV row per run."""
    input:
        metrics=SCORED,
    output:
        in_report(WORK / "summary.tsv"),
    log:
        WORK / "logs/summary/summary.log",
    params:
        runs=SUMMARY_RUNS,
    script:
        "../scripts/summary.py"


# Ranked by the validation metric: the test split is reported beside it, never used to choose.
rule leaderboard:
    """Each sweep's runs ranked by their validation metric; the best run is marked."""
    input:
        summaries=[WORK / f"runs/{run}/finetune/summary.json" for run in SWEEP_RUNS],
        metrics=metrics_of(SWEEP_RUNS),
    output:
        in_report(WORK / "leaderboard.tsv"),
    log:
        WORK / "logs/leaderboard/leaderboard.log",
    params:
        sweeps=PLAN.sweeps,
        runs=SWEEP_RUNS,
    script:
        "../scripts/leaderboard.py"


# The model's metrics beside the baselines' (each point's fitted on that point's training
# samples), against the training samples: the learning-curve points and the run itself; beside
# them those of its from-scratch twin (Plan.scratch_curve), if the config has one.
rule learning_curve:
    """A run's test metrics against the number of its training samples."""
    input:
        unpack(curve_inputs),
    output:
        table=in_report(WORK / "learning_curve/{run}.tsv"),
        plot=in_report(figure(WORK / "learning_curve/{run}")),
    log:
        WORK / "logs/learning_curve/{run}.log",
    params:
        options=FLAGS.learning_curve,
        paths=input_flags(scratch_metrics="scratch"),
    shell:
        "python -m aam learning-curve --splits {input.splits:q} --metrics {input.metrics:q}"
        " --output {output.table:q} --plot {output.plot:q} {params.options} {params.paths}"
        " > {log:q} 2>&1"


# Each size's errors averaged over the seeds, per test sample of the left-out study (the same
# for every point), beside the baselines' of each point and the from-scratch twin's
# (Plan.scratch_new_study), if the config has one; intervals resample the study's subjects.
rule new_study:
    """A new study with few labels: test error against the labelled samples fine-tuned on."""
    input:
        unpack(lambda wc: PLAN.new_study_inputs(wc.run)),
    output:
        table=in_report(WORK / "new_study/{run}.tsv"),
        plot=in_report(figure(WORK / "new_study/{run}")),
    log:
        WORK / "logs/new_study/{run}.log",
    params:
        options=FLAGS.new_study,
        paths=input_flags(scratch_predictions="scratch", embedding_forests="forests"),
    shell:
        "python -m aam new-study --splits {input.splits:q} --baselines {input.baselines:q}"
        " --predictions {input.predictions:q} --metadata {input.metadata:q}"
        " --output {output.table:q} --plot {output.plot:q} {params.options} {params.paths}"
        " > {log:q} 2>&1"


# The model's beside the baselines' (each fold's fitted on that fold's training samples).
rule cross_validation:
    """A cross-validated run's test metrics per fold, their mean and sd over the folds."""
    input:
        metrics=lambda wc: metrics_of(PLAN.cv[wc.run]["members"]),
    output:
        in_report(WORK / "cv/{run}.tsv"),
    log:
        WORK / "logs/cross_validation/{run}.log",
    shell:
        "python -m aam cross-validation --metrics {input.metrics:q} --output {output:q}"
        " > {log:q} 2>&1"
