# The N x N UniFrac matrix of a dataset: an analysis output, a target of all only with
# unifrac.matrix: true (training computes each batch's distances from the table and the tree).
# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).
if PLAN.shards == 1:

    rule unifrac:
        """A dataset's N x N UniFrac matrix (for analysis; training does not read it)."""
        input:
            table=dataset_table,
            tree=lambda wc: tree_of(wc.dataset),
        output:
            matrix=WORK / "unifrac/{dataset}.{metric}.h5",
            provenance=WORK / "unifrac/{dataset}.{metric}.provenance.json",
        log:
            WORK / "logs/unifrac/{dataset}.{metric}.log",
        threads: config["threads"]
        params:
            options=FLAGS.unifrac,
        shell:
            "python -m aam --provenance {output.provenance:q} unifrac --table {input.table:q} --tree {input.tree:q}"
            " --metric {wildcards.metric:q} --threads {threads} --output {output.matrix:q} {params.options}"
            " > {log:q} 2>&1"

else:
    # unifrac.shards: K > 1. Shard k computes a row block (balanced by pairs); the partial
    # files are temporary: the gathered matrix replaces them.
    SHARD_NAME = f"{{dataset}}.{{metric}}.{{shard}}of{PLAN.shards}"
    SHARD_PARTIALS = expand(
        WORK / f"unifrac/shards/{SHARD_NAME}.h5",
        shard=range(1, PLAN.shards + 1),
        allow_missing=True,
    )

    rule unifrac_shard:
        """Row block {shard} of K of a UniFrac matrix (unifrac.shards: K)."""
        input:
            table=dataset_table,
            tree=lambda wc: tree_of(wc.dataset),
        output:
            partial=temp(WORK / f"unifrac/shards/{SHARD_NAME}.h5"),
            provenance=WORK / f"unifrac/shards/{SHARD_NAME}.provenance.json",
        log:
            WORK / f"logs/unifrac_shard/{SHARD_NAME}.log",
        threads: config["threads"]
        params:
            options=FLAGS.unifrac_shards,
        shell:
            "python -m aam --provenance {output.provenance:q} unifrac-shard --table {input.table:q} --tree {input.tree:q}"
            " --metric {wildcards.metric:q} --shard {wildcards.shard:q} --threads {threads}"
            " --output {output.partial:q} {params.options} > {log:q} 2>&1"

    rule unifrac_gather:
        """The K shards' partial files merged into the matrix rule unifrac would write."""
        input:
            partials=SHARD_PARTIALS,
            table=dataset_table,
            tree=lambda wc: tree_of(wc.dataset),
        output:
            matrix=WORK / "unifrac/{dataset}.{metric}.h5",
            provenance=WORK / "unifrac/{dataset}.{metric}.provenance.json",
        log:
            WORK / "logs/unifrac_gather/{dataset}.{metric}.log",
        params:
            options=FLAGS.unifrac_shards,
        shell:
            "python -m aam --provenance {output.provenance:q} unifrac-gather --table {input.table:q} --tree {input.tree:q}"
            " --metric {wildcards.metric:q} --output {output.matrix:q} --partials {input.partials:q}"
            " {params.options} > {log:q} 2>&1"


# The files QIIME 2 imports: the ordination and the matrix as an lsmat TSV.
rule pcoa:
    """PCoA of a dataset's UniFrac matrix (by group_column), and the files QIIME 2 imports."""
    input:
        matrix=WORK / "unifrac/{dataset}.{metric}.h5",
        metadata=lambda wc: PLAN.color_metadata(wc.dataset),
    output:
        plot=in_report(figure(WORK / "unifrac/{dataset}.{metric}.pcoa/pcoa")),
        ordination=WORK / "unifrac/{dataset}.{metric}.pcoa/ordination.txt",
        lsmat=WORK / "unifrac/{dataset}.{metric}.pcoa/distance-matrix.tsv",
        provenance=WORK / "unifrac/{dataset}.{metric}.pcoa/provenance.json",
    log:
        WORK / "logs/pcoa/{dataset}.{metric}.log",
    threads: config["threads"]  # BLAS threads of the eigendecomposition
    params:
        out_dir=out_dir,
        options=FLAGS.pcoa,
        paths=input_flags(metadata="metadata"),
    shell:
        "python -m aam --provenance {output.provenance:q} pcoa --matrix {input.matrix:q}"
        " --output-dir {params.out_dir:q}"
        " {params.options} {params.paths} > {log:q} 2>&1"
