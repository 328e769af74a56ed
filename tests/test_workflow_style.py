"""Rules like the Snakemake workflow catalog's (issue 40, item 4): short rules; what every rule
shares given to each in one place (aam.workflow.snakefile.shared_directives: benchmark, code
fingerprint, conda env, image input); rule `all` from get_final_output() in common.smk; no
parse-time side effect on the environment (AAM_STOP_WITH_PID reaches the jobs through the
shell prefix)."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from checkout import REPO

from aam.training.checkpointing.orphan import ENV
from aam.workflow.flags import Flags, input_flags
from aam.workflow.snakefile import aam_command, benchmark_of

WORKFLOW_FILES = [REPO / "workflow/Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]
RULE = re.compile(r"^(\s*)(?:rule (\w+):|use rule \w+ as (\w+) with:)")


def rule_lengths(files: list[Path] = WORKFLOW_FILES) -> dict[str, int]:
    """rule name -> lines of its block: from `rule X:` (or `use rule ... as X with:`) to its
    last non-blank line, docstring and comments inside it included."""
    lengths = {}
    for path in files:
        lines = path.read_text().splitlines()
        for start, line in enumerate(lines):
            match = RULE.match(line)
            if not match:
                continue
            indent, end = len(match.group(1)), start + 1
            while end < len(lines) and (
                not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
            ):
                end += 1
            while not lines[end - 1].strip():
                end -= 1
            lengths[match.group(2) or match.group(3)] = end - start
    return lengths


def test_rules_are_as_short_as_the_catalogs():
    """Median rule <= 17 lines (the catalog's median: 13; before issue 40, 31 rules, median 29
    and longest 60 lines by this count; 15 until issue 58 gave each rule whose command names
    an optional input file a ``paths`` params line, apart from the config's values; 16 until
    issue 73 gave every rule that computes a provenance output)."""
    lengths = rule_lengths()
    assert len(lengths) >= 30, sorted(lengths)
    table = ", ".join(f"{rule} {n}" for rule, n in sorted(lengths.items(), key=lambda x: x[1]))
    assert statistics.median(lengths.values()) <= 17, table


def test_repeated_directives_are_gone_from_the_rules():
    text = "".join(path.read_text() for path in WORKFLOW_FILES)
    for repeated in ("image=IMAGE_INPUT", "conda:", "code=code(", "localrule: True"):
        assert repeated not in text, repeated
    assert text.count("benchmark:") == 1  # build_container's own (container.smk)


def test_rule_all_comes_from_get_final_output_in_common_smk():
    snakefile = (REPO / "workflow/Snakefile").read_text()
    assert re.search(
        r"rule all:\n(?:    .*\n)*?    input:\n        get_final_output\(\),", snakefile
    )
    assert "def get_final_output(" in (REPO / "workflow/rules/common.smk").read_text()


def test_the_workflow_sets_no_environment_variable_at_parse_time():
    for path in WORKFLOW_FILES:
        assert not re.search(r"os\.environ\[.*\]\s*=|os\.environ\.update|putenv", path.read_text())


def test_benchmark_of_a_log():
    work = Path("/w")
    log = "/w/logs/cv_split/{dataset,[^/]+}.{folds,\\d+}x{seed}.fold{fold}.log"
    assert (
        benchmark_of(log, work)
        == "/w/benchmarks/cv_split/{dataset,[^/]+}.{folds,\\d+}x{seed}.fold{fold}.tsv"
    )
    assert benchmark_of("logs/stage/{dataset}.log", Path(".")) == "benchmarks/stage/{dataset}.tsv"
    with pytest.raises(ValueError):
        benchmark_of("/elsewhere/x.log", work)


def test_aam_command_of_a_shell_command():
    assert aam_command("python -m aam --provenance {output.provenance:q} unifrac-shard --t") == (
        "unifrac-shard"
    )
    assert aam_command("{params.launcher} -m aam --provenance {output.p:q} pretrain") == "pretrain"
    assert aam_command("python -m aam plot-history --history {input.history:q}") == "plot-history"
    assert aam_command("singularity build --fakeroot {output.image:q}") is None
    assert aam_command(None) is None


def test_every_rules_config_values_are_in_a_params_function_of_the_wildcards_alone():
    """Snakemake compares a params function's value with the last run's only if it takes none
    of input, output, threads and resources (issue 58): every ``Flags`` method, the config's
    values of a rule, takes the wildcards alone; file paths travel in ``input_flags``."""
    methods = [m for n, m in inspect.getmembers(Flags, inspect.isfunction) if n[0] != "_"]
    assert len(methods) > 15
    for method in methods:
        assert list(inspect.signature(method).parameters) == ["self", "wildcards"], method
    for path in WORKFLOW_FILES:  # no params lambda of the input at all (train.smk had them)
        assert not re.search(r"lambda \w+, input", path.read_text()), path


def test_input_flags_name_the_input_files_a_job_has():
    class Input:
        given, taxonomy, scratch = [], "taxa.tsv", ["a b/metrics.json", "c/metrics.json"]

    assert input_flags(from_file="given", taxonomy="taxonomy")(None, Input) == "--taxonomy taxa.tsv"
    words = shlex.split(input_flags(scratch_metrics="scratch")(None, Input))
    assert words == ["--scratch-metrics", "a b/metrics.json", "c/metrics.json"]
    assert input_flags(from_file="given")(None, Input) == ""


# The parsed workflow, dumped by a Snakemake of its own (a parse runs common.smk: sys.path, the
# shell prefix, the fingerprint cache).
PARSE = """
import json, os, sys
from pathlib import Path
from snakemake import shell
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(configfiles=[Path(sys.argv[1])]),
        snakefile=Path("workflow/Snakefile"),
    )._workflow
    rules = {
        rule.name: {
            "log": [str(path) for path in rule.log],
            "benchmark": str(rule.benchmark) if rule.benchmark else None,
            "conda": rule.conda_env,
            "inputs": list(rule.input._names),
            "input": [str(path) for path in rule.input if not callable(path)],
            "code": dict(rule.params.items()).get("code"),
            "params": [str(v) for _, v in rule.params.items() if not callable(v)],
            "shellcmd": rule.shellcmd,
            "script": rule.script,
            "local": workflow.is_local(rule),
        }
        for rule in workflow.rules
    }
    from aam.cli import COMMANDS  # the copy's package (common.smk put it first on sys.path)
    from aam.workflow.fingerprint import code_fingerprint

    print(json.dumps({
        "rules": rules,
        "fingerprints": {name: code_fingerprint(c[0]) for name, c in COMMANDS.items()},
        "work": str(workflow.globals["WORK"]),
        "prefix": shell._process_prefix,
        "environ": os.environ.get("AAM_STOP_WITH_PID"),
        "pid": os.getpid(),
    }))
"""


def _parse(root: Path, config: Path) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", PARSE, str(config)], cwd=root, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def parsed(checkout_copy, tmp_path_factory) -> list[dict]:
    """The workflow parsed with the test config, and with a container platform and UniFrac
    shards (rules build_container, unifrac_shard, unifrac_gather)."""
    tmp = tmp_path_factory.mktemp("parsed")
    config = yaml.safe_load((REPO / "config/test.yaml").read_text())
    config["workdir"] = str(tmp / "work")
    plain = tmp / "plain.yaml"
    plain.write_text(yaml.safe_dump(config))
    config["container"] = {"platform": "cosmos", "dir": str(tmp / "images")}
    config["unifrac"] = {"matrix": True, "shards": 2}
    site = tmp / "site.yaml"
    site.write_text(yaml.safe_dump(config))
    return [_parse(checkout_copy, plain), _parse(checkout_copy, site)]


@pytest.mark.workflow
def test_every_rule_gets_the_shared_directives(parsed):
    seen = set()
    for workflow in parsed:
        work = Path(workflow["work"])
        for name, rule in workflow["rules"].items():
            seen.add(name)
            if rule["shellcmd"] is None and rule["script"] is None:  # rule all
                assert not rule["log"] and rule["benchmark"] is None and rule["conda"] is None
                continue
            log = rule["log"][0]
            assert log.startswith(f"{work}/logs/{name}/"), (name, log)
            assert rule["benchmark"] == benchmark_of(log, work), name
            command = aam_command(rule["shellcmd"])
            expected = workflow["fingerprints"][command] if command else None
            assert rule["code"] == expected, name
            if name == "build_container":  # makes the image, on the host
                assert rule["conda"] is None and "image" not in rule["inputs"]
            else:
                assert rule["conda"] == "../envs/aam.yaml", name
                assert rule["inputs"][-1] == "image", name
    assert {"all", "build_container", "unifrac", "unifrac_shard", "unifrac_gather"} <= seen
    assert {"cv_split", "subset_baselines", "summary", "leaderboard"} <= seen
    site = parsed[1]["rules"]
    assert any(path.endswith(".sif") for path in site["pretrain"]["input"])  # waits for the image


@pytest.mark.workflow
def test_jobs_get_the_workflow_token_through_the_shell_prefix_not_the_environment(parsed):
    """A training job stops when the Snakemake that runs it is gone
    (aam.training.checkpointing.orphan): the shell of every job exports AAM_STOP_WITH_PID naming
    the Snakemake that parsed the workflow (in a SLURM job, the job's own); the parse leaves that
    Snakemake's environment alone, and the token is in no rule's shell command or params (rerun
    triggers)."""
    for workflow in parsed:
        token = f"{workflow['pid']}@{socket.gethostname()}"
        assert f"export {ENV}={token};" in workflow["prefix"]
        assert workflow["environ"] == os.environ.get(ENV)
        cache = f"export TORCHINDUCTOR_CACHE_DIR={workflow['work']}/compile-cache;"
        assert cache in workflow["prefix"]  # a cache folder is no rerun trigger either
        for rule in workflow["rules"].values():
            assert ENV not in (rule["shellcmd"] or "") and rule["code"] != token
            assert "TORCHINDUCTOR" not in (rule["shellcmd"] or "") + str(rule["params"])


@pytest.mark.workflow
def test_a_job_runs_with_the_token_of_its_snakemake(checkout_copy, tmp_path):
    """A real job of the workflow's rules (stage) with a shell that reports the variables: the
    token, and the torch.compile cache every job shares (``compile_cache``, by default in the
    work directory)."""
    root = tmp_path / "repo"
    shutil.copytree(checkout_copy, root)
    (root / "workflow/Snakefile.token").write_text(
        'include: "rules/common.smk"\n\n\n'
        "rule token:\n"
        "    output:\n"
        '        "token.txt",\n'
        "    shell:\n"
        '        "echo $AAM_STOP_WITH_PID $TORCHINDUCTOR_CACHE_DIR > {output}"\n'
    )
    command = [sys.executable, "-m", "snakemake", "token.txt", "-s", "workflow/Snakefile.token"]
    command += ["--cores", "1", "--configfile", "config/test.yaml"]
    command += ["--config", f"workdir={tmp_path / 'work'}"]
    env = {k: v for k, v in os.environ.items() if k != ENV}
    process = subprocess.Popen(
        command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    token, cache = (root / "token.txt").read_text().split()
    assert token == f"{process.pid}@{socket.gethostname()}"
    assert cache == str(tmp_path / "work" / "compile-cache")  # one torch.compile cache for all
