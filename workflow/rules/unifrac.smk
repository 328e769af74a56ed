# The N x N UniFrac matrix of a dataset: an analysis output, a target of all only with
# unifrac.matrix: true (training computes each batch's distances from the table and the tree).
if PLAN.shards == 1:

    rule unifrac:
        """A dataset's N x N UniFrac matrix (for analysis; training does not read it)."""
        input:
            table=dataset_table,
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

else:
    # unifrac.shards: K > 1. Shard k computes a row block (balanced by pairs); the partial
    # files are temporary: the gathered matrix replaces them.
    SHARD_NAME = f"{{dataset}}.{{metric}}.{{shard}}of{PLAN.shards}"

    rule unifrac_shard:
        """Row block {shard} of K of a UniFrac matrix (unifrac.shards: K)."""
        input:
            table=dataset_table,
            tree=lambda wc: tree_of(wc.dataset),
            image=IMAGE_INPUT,
        output:
            partial=temp(WORK / f"unifrac/shards/{SHARD_NAME}.h5"),
            provenance=WORK / f"unifrac/shards/{SHARD_NAME}.provenance.json",
        log:
            WORK / f"logs/unifrac_shard/{SHARD_NAME}.log",
        benchmark:
            WORK / f"benchmarks/unifrac_shard/{SHARD_NAME}.tsv"
        conda:
            CONDA_ENV
        threads: config["threads"]
        params:
            code=code("unifrac-shard"),
            options=cli_flags(
                {"alpha": config["unifrac"]["alpha"], "shards": PLAN.shards}
            ),
        shell:
            "python -m aam --provenance {output.provenance:q} unifrac-shard --table {input.table:q} --tree {input.tree:q}"
            " --metric {wildcards.metric:q} --shard {wildcards.shard:q} --threads {threads}"
            " --output {output.partial:q} {params.options} > {log:q} 2>&1"

    rule unifrac_gather:
        """The K shards' partial files merged into the matrix rule unifrac would write."""
        input:
            partials=expand(
                WORK / f"unifrac/shards/{SHARD_NAME}.h5",
                shard=range(1, PLAN.shards + 1),
                allow_missing=True,
            ),
            table=dataset_table,
            tree=lambda wc: tree_of(wc.dataset),
            image=IMAGE_INPUT,
        output:
            matrix=WORK / "unifrac/{dataset}.{metric}.h5",
            provenance=WORK / "unifrac/{dataset}.{metric}.provenance.json",
        log:
            WORK / "logs/unifrac_gather/{dataset}.{metric}.log",
        benchmark:
            WORK / "benchmarks/unifrac_gather/{dataset}.{metric}.tsv"
        conda:
            CONDA_ENV
        params:
            code=code("unifrac-gather"),
            options=cli_flags(
                {"alpha": config["unifrac"]["alpha"], "shards": PLAN.shards}
            ),
        shell:
            "python -m aam --provenance {output.provenance:q} unifrac-gather --table {input.table:q} --tree {input.tree:q}"
            " --metric {wildcards.metric:q} --output {output.matrix:q} --partials {input.partials:q}"
            " {params.options} > {log:q} 2>&1"


rule pcoa:
    """PCoA of a dataset's UniFrac matrix, coloured by its group_column, and the files QIIME 2
    imports: the ordination and the matrix as an lsmat TSV."""
    input:
        matrix=WORK / "unifrac/{dataset}.{metric}.h5",
        metadata=WORK / "data/{dataset}/metadata.tsv",
        image=IMAGE_INPUT,
    output:
        plot=report(
            WORK / "unifrac/{dataset}.{metric}.pcoa/pcoa.png",
            caption="../report/pcoa.rst",
            category=CATEGORY["results"],
            labels={"file": "PCoA of {dataset} ({metric} UniFrac)"},
        ),
        ordination=WORK / "unifrac/{dataset}.{metric}.pcoa/ordination.txt",
        lsmat=WORK / "unifrac/{dataset}.{metric}.pcoa/distance-matrix.tsv",
    log:
        WORK / "logs/pcoa/{dataset}.{metric}.log",
    benchmark:
        WORK / "benchmarks/pcoa/{dataset}.{metric}.tsv"
    conda:
        CONDA_ENV
    threads: config["threads"]  # BLAS threads of the eigendecomposition
    params:
        code=code("pcoa"),
        out_dir=lambda wc, output: Path(output.plot).parent,
        options=lambda wc, input: cli_flags(
            {
                "metadata": (
                    input.metadata if DATASETS[wc.dataset]["group_column"] else None
                ),
                "color_column": DATASETS[wc.dataset]["group_column"],
            }
        ),
    shell:
        "python -m aam pcoa --matrix {input.matrix:q} --output-dir {params.out_dir:q}"
        " {params.options} > {log:q} 2>&1"
