# A dataset's `taxonomy:` names its ASVs in the importance table and figure: a QIIME 2
# taxonomy TSV, staged like a tree (stage_taxonomy), or an RDP training set the ASVs are
# classified with (rule taxonomy). Neither runs for a dataset without one.
# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


localrules:
    stage_taxonomy,


rule stage_taxonomy:
    """Copy a dataset's configured taxonomy (TSV or .qza) into the work area (`aam stage`)."""
    input:
        taxonomy=given("taxonomy"),
    output:
        taxonomy=WORK / "data/{dataset}/taxonomy.tsv",
        manifest=WORK / "data/{dataset}/taxonomy.sha256",
        provenance=WORK / "data/{dataset}/taxonomy.provenance.json",
    log:
        WORK / "logs/stage_taxonomy/{dataset}.log",
    params:
        out_dir=out_dir,
    shell:
        "python -m aam --provenance {output.provenance:q} stage --output-dir {params.out_dir:q}"
        " --manifest taxonomy.sha256"
        " --taxonomy taxonomy.tsv={input.taxonomy:q} > {log:q} 2>&1"


rule taxonomy:
    """Classify a dataset's ASVs with the RDP classifier trained on its training set."""
    input:
        table=WORK / "data/{dataset}/table.biom",
        sequences=lambda wc: DATASETS[wc.dataset]["taxonomy"]["training_sequences"],
        taxa=lambda wc: DATASETS[wc.dataset]["taxonomy"]["training_taxa"],
    output:
        taxonomy=WORK / "data/{dataset}/rdp_taxonomy.tsv",
        provenance=WORK / "data/{dataset}/rdp_taxonomy.provenance.json",
    log:
        WORK / "logs/taxonomy/{dataset}.log",
    params:
        options=FLAGS.taxonomy,
    shell:
        "python -m aam --provenance {output.provenance:q} taxonomy --table {input.table:q}"
        " --training-sequences {input.sequences:q}"
        " --training-taxa {input.taxa:q} --output {output.taxonomy:q} {params.options} > {log:q} 2>&1"
