rule validate:
    """Golden-file check of the model on this site's device against CPU-made golden files."""
    input:
        golden=os.path.relpath(REPO / "tests/golden/golden.pt"),  # relative: a moved checkout reruns nothing
        image=IMAGE_INPUT,
    output:
        report=report(
            WORK / "validation/golden.json",
            caption="../report/validation.rst",
            category=CATEGORY["self_check"],
            labels={"file": "golden compare"},
        ),
        provenance=WORK / "validation/provenance.json",
    log:
        WORK / "logs/validate/validate.log",
    benchmark:
        WORK / "benchmarks/validate/validate.tsv"
    conda:
        CONDA_ENV
    params:
        code=code("validate"),
        golden_dir=lambda wc, input: Path(input.golden).parent,
        options=cli_flags({"device": config["device"]}),
    shell:
        "python -m aam --provenance {output.provenance:q} validate compare"
        " --golden {params.golden_dir:q} --output {output.report:q} {params.options} > {log:q} 2>&1"
