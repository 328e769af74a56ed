# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).


rule validate:
    """Golden-file check of the model on this site's device against CPU-made golden files."""
    input:
        golden=os.path.relpath(REPO / "tests/golden/golden.pt"),  # relative: a moved checkout reruns nothing
    output:
        report=in_report(WORK / "validation/golden.json"),
        provenance=WORK / "validation/provenance.json",
    log:
        WORK / "logs/validate/validate.log",
    params:
        options=FLAGS.validate,
    shell:
        "python -m aam --provenance {output.provenance:q} validate compare"
        ' --golden "$(dirname {input.golden:q})" --output {output.report:q} {params.options}'
        " > {log:q} 2>&1"
