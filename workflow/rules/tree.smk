rule tree:
    """Phylogeny of the ASV sequences, for datasets configured without a tree."""
    input:
        table=WORK / "data/{dataset}/table.biom",
    output:
        tree=WORK / "data/{dataset}/built_tree.nwk",
    log:
        WORK / "logs/tree/{dataset}.log",
    threads: config["threads"]
    shell:
        "python -m aam tree --table {input.table:q} --output {output.tree:q} --threads {threads} > {log:q} 2>&1"
