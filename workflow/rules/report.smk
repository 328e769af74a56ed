def unifrac_benchmarks(dataset):
    """Benchmark TSVs of the jobs that make a dataset's UniFrac matrix (none without one)."""
    metric, shards = PLAN.metric, PLAN.shards
    if dataset not in PLAN.matrix_datasets:
        return []
    if shards == 1:
        return [WORK / f"benchmarks/unifrac/{dataset}.{metric}.tsv"]
    return [
        *(
            WORK / f"benchmarks/unifrac_shard/{dataset}.{metric}.{k}of{shards}.tsv"
            for k in range(1, shards + 1)
        ),
        WORK / f"benchmarks/unifrac_gather/{dataset}.{metric}.tsv",
    ]


def benchmark_files(run):
    """Snakemake benchmark TSVs of every stage of a run (inputs of the profiling report)."""
    return [
        *unifrac_benchmarks(RUNS[run]["dataset"]),
        *(
            WORK / f"benchmarks/{rule}/{run}.tsv"
            for rule in ("pretrain", "finetune", "predict")
        ),
        WORK / f"benchmarks/profile/{run}.tsv",
        WORK / "benchmarks/validate/validate.tsv",
    ]


rule profiling_report:
    """One HTML page: top kernels, time by category, memory and samples/s per batch size with a
    recommended batch size, attention backends, and every rule's wall time and peak RSS.
    """
    input:
        profile=WORK / f"profiling/{PLAN.profile_run}/kernel_stats.csv",
        benchmarks=benchmark_files(PLAN.profile_run),
        image=IMAGE_INPUT,
    output:
        report(
            WORK / "profiling/report.html",
            caption="../report/profiling.rst",
            category="Profiling",
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


rule summary:
    """Every run's test-split metrics beside the baselines', one TSV row per run."""
    input:
        metrics=expand(WORK / "runs/{run}/predict/metrics.json", run=list(RUNS)),
        image=IMAGE_INPUT,
    output:
        report(
            WORK / "summary.tsv",
            caption="../report/summary.rst",
            category="Summary",
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
            category="Summary",
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
            category="Summary",
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
