rule profiling_report:
    """One HTML page: top kernels, time by category, memory and samples/s per batch size with a
    recommended batch size, attention backends, and every rule's wall time and peak RSS.
    """
    input:
        profile=WORK / f"profiling/{PLAN.profile_run}/kernel_stats.csv",
        benchmarks=PLAN.profiling_benchmarks(),
        image=IMAGE_INPUT,
    output:
        report(
            WORK / "profiling/report.html",
            caption="../report/profiling.rst",
            category=CATEGORY["profiling"],
            labels={"file": "profiling report"},
        ),
    log:
        WORK / "logs/profiling_report/report.log",
    benchmark:
        WORK / "benchmarks/profiling_report/report.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("profiling-report"),
        profile_dir=lambda wc, input: Path(input.profile).parent,
    shell:
        "python -m aam profiling-report --profile-dir {params.profile_dir:q}"
        " --benchmarks {input.benchmarks:q} --output {output:q} > {log:q} 2>&1"


rule overview:
    """The report's front page: every run's test metrics beside the baselines' with their
    intervals, AAM minus each baseline (paired intervals) with a verdict, the output folders.
    """
    input:
        metrics=expand(WORK / "runs/{run}/predict/metrics.json", run=list(RUNS)),
        image=IMAGE_INPUT,
    output:
        report(
            WORK / "overview.html",
            caption="../report/overview.rst",
            category=CATEGORY["results"],
            labels={"file": "overview: AAM beside the baselines"},
        ),
    log:
        WORK / "logs/overview/overview.log",
    benchmark:
        WORK / "benchmarks/overview/overview.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("overview"),
        runs=lambda wc, input: [
            f"{run}={spec['dataset']}={path}"
            for (run, spec), path in zip(RUNS.items(), input.metrics)
        ],
    shell:
        "python -m aam overview --run {params.runs:q} --output {output:q} > {log:q} 2>&1"


rule summary:
    """Every run's test-split metrics beside the baselines', one TSV row per run."""
    input:
        metrics=expand(WORK / "runs/{run}/predict/metrics.json", run=list(RUNS)),
        image=IMAGE_INPUT,
    output:
        report(
            WORK / "summary.tsv",
            caption="../report/summary.rst",
            category=CATEGORY["results"],
            labels={"file": "metrics of every run"},
        ),
    log:
        WORK / "logs/summary/summary.log",
    benchmark:
        WORK / "benchmarks/summary/summary.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        runs=[
            {
                "run": run,
                "dataset": spec["dataset"],
                "target": DATASETS[spec["dataset"]]["target"],
            }
            for run, spec in RUNS.items()
        ],
    script:
        "../scripts/summary.py"


rule leaderboard:
    """Each sweep's runs ranked by their validation metric (the test split is reported beside
    it, never used to choose); the best run is marked."""
    input:
        summaries=[
            WORK / f"runs/{run}/finetune/summary.json" for run in PLAN.sweep_runs
        ],
        metrics=[WORK / f"runs/{run}/predict/metrics.json" for run in PLAN.sweep_runs],
        image=IMAGE_INPUT,
    output:
        report(
            WORK / "leaderboard.tsv",
            caption="../report/leaderboard.rst",
            category=CATEGORY["results"],
            labels={"file": "sweep leaderboard"},
        ),
    log:
        WORK / "logs/leaderboard/leaderboard.log",
    benchmark:
        WORK / "benchmarks/leaderboard/leaderboard.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        sweeps=PLAN.sweeps,
        runs=PLAN.sweep_runs,
    script:
        "../scripts/leaderboard.py"


rule learning_curve:
    """A run's test metrics, the model's beside the baselines' (each point's fitted on that
    point's training samples), against its training samples: the learning-curve points and the
    run itself (the whole training set)."""
    input:
        splits=lambda wc: [split_file(run) for run in curve_runs(wc)],
        metrics=lambda wc: [
            WORK / f"runs/{run}/predict/metrics.json" for run in curve_runs(wc)
        ],
        image=IMAGE_INPUT,
    output:
        table=report(
            WORK / "learning_curve/{run}.tsv",
            caption="../report/learning_curve.rst",
            category=CATEGORY["results"],
            labels={"file": "learning curve of {run} (table)"},
        ),
        plot=report(
            WORK / "learning_curve/{run}.png",
            caption="../report/learning_curve.rst",
            category=CATEGORY["results"],
            labels={"file": "learning curve of {run}"},
        ),
    log:
        WORK / "logs/learning_curve/{run}.log",
    benchmark:
        WORK / "benchmarks/learning_curve/{run}.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("learning-curve"),
        options=lambda wc: cli_flags(
            {
                "fractions": [*PLAN.curves[wc.run]["points"].values(), 1],
                "target_column": dataset_of(wc)["target"],
                "group_column": dataset_of(wc)["group_column"],
            }
        ),
    shell:
        "python -m aam learning-curve --splits {input.splits:q}"
        " --metrics {input.metrics:q} --output {output.table:q} --plot {output.plot:q}"
        " {params.options} > {log:q} 2>&1"


rule cross_validation:
    """A cross-validated run's test metrics per fold and their mean and sd over the folds, the
    model's beside the baselines' (each fold's baselines fitted on that fold's training
    samples)."""
    input:
        metrics=lambda wc: [
            WORK / f"runs/{member}/predict/metrics.json"
            for member in PLAN.cv[wc.run]["members"]
        ],
        image=IMAGE_INPUT,
    output:
        report(
            WORK / "cv/{run}.tsv",
            caption="../report/cross_validation.rst",
            category=CATEGORY["results"],
            labels={"file": "cross-validation of {run}"},
        ),
    log:
        WORK / "logs/cross_validation/{run}.log",
    benchmark:
        WORK / "benchmarks/cross_validation/{run}.tsv"
    localrule: True
    conda:
        CONDA_ENV
    params:
        code=code("cross-validation"),
    shell:
        "python -m aam cross-validation --metrics {input.metrics:q} --output {output:q}"
        " > {log:q} 2>&1"
