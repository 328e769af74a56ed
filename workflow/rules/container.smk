# Content-addressed cluster images: containers/<platform>.def -> <container.dir>/aam-<platform>-<hash>.sif
# (<hash>: sha256 of the .def, aam.workflow.containers.image_name). Active when the config sets
# `container.platform` (cosmos, lumi). Editing the .def gives a new image path, so the image is
# rebuilt and every stage that runs in it reruns; touching or copying the .sif reruns nothing.
#
# Rules that run in the image get IMAGE_INPUT (common.smk: ancient(PLAN.image_input), or []
# without a build) as input `image` (shared_directives), so that they wait for the build
# (`container:` makes no DAG edge); the Snakefile's global `container: IMAGE` gives every rule
# but this one the image (aam.workflow.plan: a profile's pinned container.image, else the one
# built here).
# shared_directives (aam/workflow/snakefile.py) adds nothing to build_container: it names its own benchmark, runs no `python -m aam` and runs on the host (no conda env, no input `image`).
if config["container"]["platform"]:

    # `singularity`: Cosmos has Singularity Pro (`module load singularitypro`); on Apptainer
    # systems `singularity` is the compatibility name of `apptainer`. The layer cache and the
    # build's temporary files go to container.dir and the job's $TMPDIR, not $HOME.
    rule build_container:
        """The platform's image from containers/<platform>.def (a CPU job with fakeroot)."""
        input:
            definition=PLAN.container_def,
        output:
            image=PLAN.built_image,
        log:
            WORK / f"logs/build_container/{Path(PLAN.built_image).stem}.log",
        benchmark:
            WORK / f"benchmarks/build_container/{Path(PLAN.built_image).stem}.tsv"
        localrule: False
        # on the host: the image does not exist yet
        container:
            None
        threads: config["threads"]
        resources:
            runtime=360,
            mem_mb=32000,
        params:
            cache=Path(config["container"]["dir"]) / "cache",
        shell:
            "export SINGULARITY_CACHEDIR=${{SINGULARITY_CACHEDIR:-{params.cache:q}}}"
            " SINGULARITY_TMPDIR=${{SINGULARITY_TMPDIR:-${{TMPDIR:-/tmp}}}};"
            ' mkdir -p "$SINGULARITY_CACHEDIR";'
            " singularity build --fakeroot {output.image:q} {input.definition:q} > {log:q} 2>&1"
