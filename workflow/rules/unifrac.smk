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
        engine=config["unifrac"]["engine"],
        alpha=config["unifrac"]["alpha"],
        device=config["unifrac"]["device"],
    shell:
        "python -m aam --provenance {output.provenance:q} unifrac --table {input.table:q} --tree {input.tree:q}"
        " --metric {wildcards.metric:q} --alpha {params.alpha:q} --engine {params.engine:q}"
        " --device {params.device:q} --threads {threads} --output {output.matrix:q} > {log:q} 2>&1"
