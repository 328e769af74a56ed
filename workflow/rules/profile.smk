rule profile:
    """A short training segment: kernel table (rocprofv3 on ROCm, torch.profiler elsewhere),
    peak memory and samples/s over batch sizes and attention backends."""
    input:
        table=lambda wc: table_of(RUNS[wc.run]["dataset"]),  # rarefied where the dataset asks
        tree=run_tree,
        image=IMAGE_INPUT,
    output:
        kernels=WORK / "profiling/{run}/kernel_stats.csv",
        memory=WORK / "profiling/{run}/memory.json",
        throughput=WORK / "profiling/{run}/throughput.json",
        provenance=WORK / "profiling/{run}/provenance.json",
    log:
        WORK / "logs/profile/{run}.log",
    benchmark:
        WORK / "benchmarks/profile/{run}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    resources:
        gpu=0,  # the cluster profiles set it
    params:
        code=code("profile"),
        out_dir=lambda wc, output: Path(output.kernels).parent,
        options=lambda wc: cli_flags(
            {
                "device": config["device"],
                "steps": config["profiling"]["steps"],
                "batch_sizes": config["profiling"]["batch_sizes"],
                **RUNS[wc.run]["model"],
            }
        ),
    shell:
        "python -m aam --provenance {output.provenance:q} profile --table {input.table:q}"
        " --tree {input.tree:q} --threads {threads} --output-dir {params.out_dir:q}"
        " {params.options} > {log:q} 2>&1"
