# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


# Kernel table by rocprofv3 on ROCm, torch.profiler elsewhere; memory and speed over batch sizes
# and attention backends.
rule profile:
    """A short training segment: kernels, peak memory and samples/s per batch size."""
    input:
        table=lambda wc: table_of(RUNS[wc.run]["dataset"]),  # rarefied where the dataset asks
        tree=run_tree,
    output:
        kernels=WORK / "profiling/{run}/kernel_stats.csv",
        memory=WORK / "profiling/{run}/memory.json",
        throughput=WORK / "profiling/{run}/throughput.json",
        provenance=WORK / "profiling/{run}/provenance.json",
    log:
        WORK / "logs/profile/{run}.log",
    threads: config["threads"]
    resources:
        gpu=0,  # the cluster profiles set it
    params:
        out_dir=out_dir,
        options=FLAGS.profile,
    shell:
        "python -m aam --provenance {output.provenance:q} profile --table {input.table:q}"
        " --tree {input.tree:q} --threads {threads} --output-dir {params.out_dir:q}"
        " {params.options} > {log:q} 2>&1"
