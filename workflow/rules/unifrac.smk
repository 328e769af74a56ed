rule unifrac:
    """UniFrac distance matrix that pretraining learns from."""
    input:
        table=WORK / "data/{dataset}/table.biom",
        tree=lambda wc: tree_of(wc.dataset),
        image=IMAGE_INPUT,
    output:
        matrix=WORK / "unifrac/{dataset}.{metric}.h5",
        provenance=WORK / "unifrac/{dataset}.{metric}.provenance.json",
    log:
        WORK / "logs/unifrac/{dataset}.{metric}.log",
    benchmark:
        WORK / "benchmarks/unifrac/{dataset}.{metric}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        code=code("unifrac"),
        options=cli_flags(
            {key: config["unifrac"][key] for key in ("alpha", "engine", "device")}
        ),
    shell:
        "python -m aam --provenance {output.provenance:q} unifrac --table {input.table:q} --tree {input.tree:q}"
        " --metric {wildcards.metric:q} --threads {threads} --output {output.matrix:q} {params.options}"
        " > {log:q} 2>&1"
