rule tree:
    """Phylogeny of the ASV sequences, for datasets configured without a tree."""
    input:
        table=WORK / "data/{dataset}/table.biom",
        image=IMAGE_INPUT,
    output:
        tree=WORK / "data/{dataset}/built_tree.nwk",
    log:
        WORK / "logs/tree/{dataset}.log",
    benchmark:
        WORK / "benchmarks/tree/{dataset}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]
    params:
        code=code("tree"),
    shell:
        "python -m aam tree --table {input.table:q} --output {output.tree:q} --threads {threads} > {log:q} 2>&1"
