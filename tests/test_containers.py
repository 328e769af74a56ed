"""Container definitions: the shipped .def files, the `aam lint-def` checks, content-addressed
image names, and the workflow's build_container rule (dry runs and a stub `singularity`)."""

import hashlib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from checkout import copy_checkout, job_counts

from aam.cli import main
from aam.errors import InputError
from aam.workflow.containers import (
    built_image,
    def_hash,
    image_name,
    lint_def,
    lint_text,
)

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "containers").glob("*.def"))

GOOD = """\
# a comment before the header
Bootstrap: docker
From: rocm/pytorch:rocm6.3.4_ubuntu22.04_py3.10_pytorch_release_2.4.0

%environment
    export MPLBACKEND=Agg

%post
    python3 -m pip install numpy

%test
    python3 -c 'import numpy'
"""


def lint(text: str) -> list[tuple[int, str]]:
    return [(p.line, p.message) for p in lint_text(textwrap.dedent(text))]


def only_problem(text: str) -> tuple[int, str]:
    problems = lint(text)
    assert len(problems) == 1, problems
    return problems[0]


# --- the shipped definition files -----------------------------------------------------------


def test_both_platforms_are_shipped():
    assert {p.stem for p in SHIPPED} >= {"cosmos", "lumi"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_definition_lints_clean(path):
    assert lint_def(path) == []


def _header(path: Path) -> dict[str, str]:
    header = {}
    for line in path.read_text().splitlines():
        if line.startswith("%"):
            break
        if ":" in line and not line.startswith("#"):
            key, value = line.split(":", 1)
            header[key.strip().lower()] = value.strip()
    return header


def test_cosmos_base_is_a_rocm63_pytorch_image():
    header = _header(REPO / "containers/cosmos.def")
    assert header["bootstrap"] == "docker"
    assert re.fullmatch(
        r"rocm/pytorch:rocm6\.3[\d.]*_ubuntu[\d.]+_py[\d.]+_pytorch_\S+", header["from"]
    )


def test_lumi_base_is_the_csc_image():
    header = _header(REPO / "containers/lumi.def")
    assert header["bootstrap"] == "localimage"
    assert header["from"].startswith("/appl/local/csc/soft/ai/images/pytorch_")
    assert "rocm6.2" in header["from"]
    text = (REPO / "containers/lumi.def").read_text()
    assert "PYTORCH_HIP_ALLOC_CONF" in text and "WANDB_MODE=" in text


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_images_install_every_runtime_dependency(path):
    """Every runtime dependency of pyproject.toml but torch (the base's) and snakemake (host)."""
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    names = {
        re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0] for d in pyproject["project"]["dependencies"]
    }
    wanted = {n for n in names if n != "torch" and not n.startswith("snakemake")}
    post = path.read_text().split("%post", 1)[1].split("%test", 1)[0]
    code = "\n".join(line for line in post.splitlines() if not line.lstrip().startswith("#"))
    assert {n for n in wanted if f'"{n}>=' not in code} == set()
    for tool in ("mafft", "fasttree", "unifrac"):
        assert tool in code
    assert "snakemake" not in code.lower()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_test_section_checks_the_stack(path):
    test = path.read_text().split("%test", 1)[1]
    for needle in (
        "torch.version.hip",
        "import torch",
        '"biom"',
        '"skbio"',
        '"numba"',
        '"unifrac"',
        "mafft --version",
    ):
        assert needle in test


# --- lint rules -----------------------------------------------------------------------------


def test_a_good_definition_has_no_problems():
    assert lint(GOOD) == []


def test_header_keywords_in_any_order_and_case():
    text = "From: ubuntu:22.04\nBootStrap: Docker\n" + GOOD.split("\n", 3)[3]
    assert lint(text) == []
    assert lint("  " + text.replace("\n", "\n  ", 1)) == []


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("From: ubuntu:22.04\n%post\n  ls\n%test\n  ls\n", 1, "no 'Bootstrap:' line"),
        ("", 1, "no 'Bootstrap:' line"),
        (
            "Bootstrap: docker\nBootstrap: docker\nFrom: ubuntu:22.04\n%post\n ls\n%test\n ls\n",
            2,
            "duplicate 'Bootstrap:' (first on line 1)",
        ),
        (
            "Bootstrap: dockr\nFrom: ubuntu:22.04\n%post\n ls\n%test\n ls\n",
            1,
            "Bootstrap 'dockr' is not one of: docker, docker-archive, library, localimage, oras, "
            "shub",
        ),
        ("Bootstrap: docker\n%post\n ls\n%test\n ls\n", 1, "no 'From:' line"),
        ("Bootstrap: docker\nFrom:\n%post\n ls\n%test\n ls\n", 2, "'From:' has no value"),
        ("Bootstrap: docker\nFrom: rocm/pytorch\n%post\n ls\n%test\n ls\n", 2, "is not pinned"),
        ("Bootstrap: docker\nFrom: rocm/pytorch:latest\n%post\n ls\n%test\n ls\n", 2, "latest"),
        (
            "Bootstrap: docker\nFrom: localhost:5000/aam\n%post\n ls\n%test\n ls\n",
            2,
            "is not pinned",
        ),
        (
            "Bootstrap: docker\nFrom: ubuntu:22.04\nthis is not a header line\n%post\n ls\n"
            "%test\n ls\n",
            3,
            "expected 'Keyword: value' in the header",
        ),
    ],
)
def test_header_problems(text, line, message):
    found_line, found = only_problem(text)
    assert found_line == line
    assert message in found


@pytest.mark.parametrize("name", ["postt", "enviroment", "install", "appfoo", "Pre"])
def test_unknown_section(name):
    text = GOOD.replace("%environment", f"%{name}")
    assert only_problem(text) == (5, f"unknown section %{name.lower()}")


@pytest.mark.parametrize(
    "header",
    [
        "%setup",
        "%files",
        "%runscript",
        "%startscript",
        "%labels",
        "%help",
        "%arguments",
        "%appinstall tool",
        "%apprun tool",
        "%appenv tool",
        "%apphelp tool",
        "%post -c /bin/bash",
    ],
)
def test_known_sections_are_accepted(header):
    assert lint(GOOD.replace("%environment", header)) == []


def test_empty_post():
    text = GOOD.replace("    python3 -m pip install numpy\n", "    # nothing yet\n\n")
    assert only_problem(text) == (8, "%post is empty")


def test_missing_post_and_missing_test():
    text = "Bootstrap: docker\nFrom: ubuntu:22.04\n%environment\n  export A=1\n"
    assert lint(text) == [
        (1, "no %post section; the image must install its dependencies"),
        (1, "no %test section; add one that imports torch and the deps"),
    ]


def test_missing_test():
    text = GOOD.split("%test")[0]
    line, message = only_problem(text)
    assert line == 2 and message.startswith("no %test section")


@pytest.mark.parametrize("source", ["aam", "./aam/", ".", "/home/me/aam-hpc"])
def test_copying_the_aam_source_in_files_is_detected(source):
    text = GOOD.replace("%environment", f"%files\n    {source} /opt/aam\n%environment")
    assert only_problem(text) == (6, f"%files copies the aam source ({source}) into the image")


def test_copying_other_files_is_fine():
    text = GOOD.replace(
        "%environment", "%files\n    pyproject.toml /opt/pyproject.toml\n%environment"
    )
    assert lint(text) == []


def test_multi_stage_build():
    text = """\
        Bootstrap: docker
        From: ubuntu:22.04
        Stage: build
        %post
            make
        Bootstrap: docker
        From: ubuntu:22.04
        Stage: final
        %files from build
            /src/bin /opt/bin
        %test
            /opt/bin/tool --version
        """
    assert lint(text) == []
    broken = textwrap.dedent(text).replace("From: ubuntu:22.04\nStage: final", "Stage: final")
    assert only_problem(broken) == (6, "no 'From:' line: the base image is not named")


def test_problems_are_in_line_order():
    text = "Bootstrap: dockr\n%postt\n  x\n%post\n  pip install .\n"
    assert [line for line, _ in lint(text)] == sorted(line for line, _ in lint(text))


def test_local_image_path_is_checked_only_on_request(tmp_path):
    base = tmp_path / "base.sif"
    text = GOOD.replace("Bootstrap: docker", "Bootstrap: localimage").replace(
        "rocm/pytorch:rocm6.3.4_ubuntu22.04_py3.10_pytorch_release_2.4.0", str(base)
    )
    assert lint_text(text) == []
    assert [p.message for p in lint_text(text, check_paths=True)] == [
        f"From: {base} does not exist on this machine"
    ]
    base.write_bytes(b"SIF")
    assert lint_text(text, check_paths=True) == []


def test_lint_def_formats_file_and_line(tmp_path):
    path = tmp_path / "bad.def"
    path.write_text(GOOD.replace("%environment", "%enviroment"))
    assert lint_def(path) == [f"{path}:5: unknown section %enviroment"]


def test_lint_def_of_a_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        lint_def(tmp_path / "missing.def")


# --- `aam lint-def` ---------------------------------------------------------------------------


def test_cli_clean_files_exit_zero(capsys):
    assert main(["lint-def", *map(str, SHIPPED)]) == 0
    assert capsys.readouterr().out == ""


def test_cli_prints_each_problem_and_exits_two(tmp_path, capsys):
    good, bad = tmp_path / "good.def", tmp_path / "bad.def"
    good.write_text(GOOD)
    bad.write_text(GOOD.replace("Bootstrap: docker", "Bootstrap: dockr").replace("%test", "%tset"))
    assert main(["lint-def", str(good), str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"{bad}:2: Bootstrap 'dockr' is not one of: docker, docker-archive, library, localimage, "
        "oras, shub",
        f"{bad}:2: no %test section; add one that imports torch and the deps",
        f"{bad}:11: unknown section %tset",
    ]
    assert captured.err.strip().splitlines() == [
        "aam lint-def: error: 3 problem(s) in 1 of 2 definition file(s); see the FILE:LINE lines "
        "above"
    ]


def test_cli_subprocess_exit_codes_and_one_line_stderr(tmp_path):
    bad = tmp_path / "bad.def"
    bad.write_text(GOOD.replace("%environment", "%enviroment"))
    run = subprocess.run(
        [sys.executable, "-m", "aam", "lint-def", str(bad)], capture_output=True, text=True
    )
    assert run.returncode == 2
    (problem,) = lint_text(bad.read_text())
    assert run.stdout.splitlines() == [f"{bad}:{problem.line}: {problem.message}"]
    assert len(run.stderr.strip().splitlines()) == 1
    missing = subprocess.run(
        [sys.executable, "-m", "aam", "lint-def", str(tmp_path / "nope.def")],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"aam lint-def: error: {tmp_path / 'nope.def'}: no such file"


def test_cli_check_paths(tmp_path, capsys):
    path = tmp_path / "local.def"
    path.write_text(
        GOOD.replace("Bootstrap: docker", "Bootstrap: localimage").replace(
            "rocm/pytorch:rocm6.3.4_ubuntu22.04_py3.10_pytorch_release_2.4.0", "/nonexistent.sif"
        )
    )
    assert main(["lint-def", str(path)]) == 0
    assert main(["lint-def", "--check-paths", str(path)]) == 2
    assert "/nonexistent.sif does not exist" in capsys.readouterr().out


# --- content hash and image names ---------------------------------------------------------------


def test_def_hash_is_a_sha256_prefix_of_the_bytes(tmp_path):
    path = tmp_path / "a.def"
    path.write_text(GOOD)
    digest = def_hash(path)
    assert re.fullmatch(r"[0-9a-f]{12}", digest)
    assert digest == hashlib.sha256(GOOD.encode()).hexdigest()[:12]


def test_def_hash_follows_content_not_path_or_mtime(tmp_path):
    a, b = tmp_path / "a.def", tmp_path / "sub" / "b.def"
    b.parent.mkdir()
    a.write_text(GOOD)
    b.write_text(GOOD)
    assert def_hash(a) == def_hash(b)
    a.touch()
    assert def_hash(a) == def_hash(b)
    a.write_text(GOOD + " ")
    assert def_hash(a) != def_hash(b)


def test_image_name(tmp_path):
    path = tmp_path / "cosmos.def"
    path.write_text(GOOD)
    assert image_name("cosmos", path) == f"aam-cosmos-{def_hash(path)}.sif"
    assert re.fullmatch(r"aam-lumi-[0-9a-f]{12}\.sif", image_name("lumi", path))
    for bad in ("", "a/b", "../x", "with space"):
        with pytest.raises(InputError, match="container platform"):
            image_name(bad, path)
    with pytest.raises(InputError, match="no such file"):
        image_name("cosmos", tmp_path / "missing.def")


def test_built_image(tmp_path):
    (tmp_path / "containers").mkdir()
    (tmp_path / "containers/cosmos.def").write_text(GOOD)
    assert built_image({"platform": None, "dir": "images"}, tmp_path) is None
    image = built_image({"platform": "cosmos", "dir": "/vast/images"}, tmp_path)
    assert image == Path("/vast/images") / image_name("cosmos", tmp_path / "containers/cosmos.def")


def test_shipped_image_names_are_distinct():
    names = {image_name(p.stem, p) for p in SHIPPED}
    assert len(names) == len(SHIPPED)


# --- workflow/rules/container.smk -----------------------------------------------------------

SNAKEFILE = """\
include: "rules/common.smk"
include: "rules/container.smk"


rule consumer:
    input:
        image=IMAGE_INPUT,
    output:
        "results/consumer.txt",
    shell:
        "echo image={input.image} > {output}"
"""
STUB = """\
#!/bin/sh
# stub: `singularity build --fakeroot OUT DEF` copies DEF to OUT
[ "$1" = build ] && [ "$2" = --fakeroot ] || exit 64
echo "$@" >> "$(dirname "$0")/calls.txt"
cp "$4" "$3"
"""


@pytest.fixture
def workflow_copy(tmp_path) -> Path:
    root = copy_checkout(tmp_path / "repo", ("aam", "workflow", "config", "data", "containers"))
    (root / "workflow/Snakefile.images").write_text(SNAKEFILE)
    stub = tmp_path / "bin/singularity"
    stub.parent.mkdir()
    stub.write_text(STUB)
    stub.chmod(0o755)
    return root


def _run(root: Path, container: str | None, *extra: str) -> subprocess.CompletedProcess:
    """snakemake on the consumer's output; `container` overrides the config's section."""
    env = {**os.environ, "PATH": f"{root.parent / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    config = ["--config", f"container={container}"] if container else []
    command = [sys.executable, "-m", "snakemake", "results/consumer.txt"]
    command += ["-s", "workflow/Snakefile.images", "--cores", "1"]
    command += ["--configfile", "config/test.yaml", *extra, *config]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, env=env)


def _jobs(run: subprocess.CompletedProcess) -> set[str]:
    assert run.returncode == 0, run.stderr[-3000:]
    if "Nothing to be done" in run.stdout + run.stderr:
        return set()
    return set(job_counts(run.stdout + run.stderr))


COSMOS = '{"platform": "cosmos", "dir": "images"}'


@pytest.mark.slow
def test_rule_builds_the_content_addressed_image_then_its_consumers(workflow_copy):
    root = workflow_copy
    image = Path("images") / image_name("cosmos", root / "containers/cosmos.def")
    dry = _run(root, COSMOS, "--dry-run", "--printshellcmds")
    assert _jobs(dry) == {"build_container", "consumer"}
    # the .def path is relative to the checkout, so a moved checkout reruns nothing
    assert f"singularity build --fakeroot {image} containers/cosmos.def" in dry.stdout
    assert "SINGULARITY_CACHEDIR" in dry.stdout

    assert _jobs(_run(root, COSMOS)) == {"build_container", "consumer"}
    calls = (root.parent / "bin/calls.txt").read_text().splitlines()
    assert calls == [f"build --fakeroot {image} containers/cosmos.def"]
    assert (root / image).read_bytes() == (root / "containers/cosmos.def").read_bytes()
    assert (root / "results/consumer.txt").read_text().strip() == f"image={image}"
    assert (root / "results/test/logs/build_container" / f"{image.stem}.log").exists()
    assert (root / "results/test/benchmarks/build_container" / f"{image.stem}.tsv").exists()

    # touching (or copying) the image reruns nothing: it is an ancient() input
    (root / image).touch()
    assert _jobs(_run(root, COSMOS, "--dry-run")) == set()

    # editing the .def names a new image: rebuild it and rerun what runs in it
    with (root / "containers/cosmos.def").open("a") as handle:
        handle.write("    # an edit\n")
    dry = _run(root, COSMOS, "--dry-run", "--printshellcmds")
    assert _jobs(dry) == {"build_container", "consumer"}
    assert image_name("cosmos", root / "containers/cosmos.def") in dry.stdout


@pytest.mark.workflow
def test_without_a_platform_there_is_no_image_to_wait_for(workflow_copy):
    run = _run(workflow_copy, None, "--dry-run")
    assert _jobs(run) == {"consumer"}
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            "workflow/Snakefile.images",
            "--list-rules",
            "--configfile",
            "config/test.yaml",
        ],
        cwd=workflow_copy,
        capture_output=True,
        text=True,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "build_container" not in listed.stdout


@pytest.mark.slow
def test_a_pinned_prebuilt_image_is_not_built(workflow_copy):
    pinned = '{"platform": "cosmos", "dir": "images", "image": "/prebuilt/aam.sif"}'
    assert _jobs(_run(workflow_copy, pinned, "--dry-run")) == {"consumer"}


@pytest.mark.slow
def test_a_broken_definition_stops_the_workflow_at_parse_time(workflow_copy):
    path = workflow_copy / "containers/cosmos.def"
    path.write_text(path.read_text().replace("%test", "%tests"))
    run = _run(workflow_copy, COSMOS, "--dry-run")
    assert run.returncode != 0
    assert "container definition has problems" in run.stdout + run.stderr
    assert "cosmos.def:" in run.stdout + run.stderr
    assert "unknown section %tests" in run.stdout + run.stderr
    missing = _run(workflow_copy, '{"platform": "summit", "dir": "images"}', "--dry-run")
    assert missing.returncode != 0
    assert "summit.def: no such file" in missing.stdout + missing.stderr
