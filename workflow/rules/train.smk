# Every rule here also gets, from shared_directives (aam/workflow/snakefile.py): benchmark WORK/benchmarks/<rule>/<name>.tsv beside its log, params.code (the fingerprint of its `python -m aam` command's code), conda env CONDA_ENV and input `image` (IMAGE_INPUT).

import shutil

from snakemake.settings.types import DeploymentMethod

from aam.workflow.launch import (
    container_exec,
    launch_prefix,
    layout_of,
    slurm_resources,
)

# A multi-node job runs its shell on the host (srun is not in the image); srun then starts the
# image on each node, as Snakemake would have (`exec --home <workdir> <apptainer-args> <image>`).
PER_NODE_CONTAINER = (
    container_exec(
        shutil.which("singularity") and "singularity" or "apptainer",
        IMAGE,
        workflow.deployment_settings.apptainer_args,
        os.getcwd(),
    )
    if IMAGE
    and DeploymentMethod.APPTAINER in workflow.deployment_settings.deployment_method
    else []
)


localrules:
    plot_history,


rule pretrain:
    """Self-supervised base: each batch's UniFrac + masked nucleotides; resumes."""
    input:
        table=run_table("pretrain"),
        tree=run_tree,
        split=pretrain_split_of,
        options=lambda wc: PLAN.options_file(wc.run),
    output:
        encoder=WORK / "runs/{run}/pretrain/encoder.pt",
        summary=WORK / "runs/{run}/pretrain/summary.json",
        history=in_report(WORK / "runs/{run}/pretrain/history.tsv"),
        provenance=WORK / "runs/{run}/pretrain/provenance.json",
    log:
        WORK / "logs/pretrain/{run}.log",
    container:
        None if PLAN.pretrain_layout.multi_node else IMAGE
    threads: config["threads"]
    resources:
        **slurm_resources(PLAN.pretrain_layout),
        nodes=PLAN.pretrain_layout.nodes,
    params:
        out_dir=out_dir,
        launcher=lambda wc, resources: launch_prefix(
            layout_of("pretrain", resources), PER_NODE_CONTAINER
        ),
        options=FLAGS.pretrain,
        paths=input_flags(split="split", options_file="options"),
        scratch=FLAGS.scratch,
    shell:
        "{params.launcher} -m aam --provenance {output.provenance:q} pretrain --table {input.table:q}"
        " --tree {input.tree:q} --threads {threads} {params.scratch} --no-progress"
        " --output-dir {params.out_dir:q} {params.options} {params.paths} > {log:q} 2>&1"


rule finetune:
    """Fine-tune on the dataset's target from a pretrained encoder (or from scratch)."""
    input:
        table=run_table("finetune"),
        metadata=staged("metadata.tsv"),
        tree=run_tree,
        split=split_of,
        encoder=encoder_of,
        options=lambda wc: PLAN.options_file(wc.run),
    output:
        model=WORK / "runs/{run}/finetune/model.pt",
        summary=WORK / "runs/{run}/finetune/summary.json",
        history=in_report(WORK / "runs/{run}/finetune/history.tsv"),
        provenance=WORK / "runs/{run}/finetune/provenance.json",
    log:
        WORK / "logs/finetune/{run}.log",
    threads: config["threads"]
    params:
        out_dir=out_dir,
        options=FLAGS.finetune,
        paths=input_flags(pretrained_encoder="encoder", options_file="options"),
        scratch=FLAGS.scratch,
    shell:
        "python -m aam --provenance {output.provenance:q} finetune --table {input.table:q}"
        " --metadata {input.metadata:q} --tree {input.tree:q} --split {input.split:q}"
        " --threads {threads} {params.scratch} --no-progress"
        " --output-dir {params.out_dir:q} {params.options} {params.paths} > {log:q} 2>&1"


rule plot_history:
    """Training curves: train and validation per epoch, the chosen epoch, the mean's MAE."""
    input:
        history=WORK / "runs/{run}/{stage}/history.tsv",
        summary=WORK / "runs/{run}/{stage}/summary.json",
    output:
        in_report(figure(WORK / "runs/{run}/{stage}/history")),
    log:
        WORK / "logs/plot_history/{run}.{stage}.log",
    params:
        options=FLAGS.plot_history,
    shell:
        "python -m aam plot-history --history {input.history:q} --summary {input.summary:q}"
        " --output {output:q} {params.options} > {log:q} 2>&1"
