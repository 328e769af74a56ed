# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


rule tree:
    """Phylogeny of the ASV sequences, for datasets configured without a tree."""
    input:
        table=WORK / "data/{dataset}/table.biom",
    output:
        tree=WORK / "data/{dataset}/built_tree.nwk",
        provenance=WORK / "data/{dataset}/built_tree.provenance.json",
    log:
        WORK / "logs/tree/{dataset}.log",
    threads: config["threads"]
    shell:
        "python -m aam --provenance {output.provenance:q} tree --table {input.table:q}"
        " --output {output.tree:q} --threads {threads} > {log:q} 2>&1"
