"""One name per stage: a rule that runs `aam <command>` carries the command's name, fingerprints
that command's code, and waits for the image it runs in (static checks of workflow/rules)."""

import re

import pytest
import yaml
from checkout import REPO

from aam.cli import COMMANDS

# stage_tree also runs `aam stage`: the optional tree is staged by a rule of its own (stage.smk);
# baselines_on and predict_on run `aam baselines` / `aam predict` for another dataset (predict_on);
# cv_split and learning_curve_split run `aam split` for a fold of a cross-validation or a
# learning-curve point, subset_baselines `aam baselines` for either.
SAME_COMMAND = {
    "stage_tree": "stage",
    "baselines_on": "baselines",
    "predict_on": "predict",
    "cv_split": "split",
    "learning_curve_split": "split",
    "subset_baselines": "baselines",
}


def _rules() -> dict[str, str]:
    """rule name -> its text, from every workflow/rules/*.smk."""
    rules = {}
    for path in sorted((REPO / "workflow/rules").glob("*.smk")):
        chunks = re.split(r"^\s*rule (\w+):", path.read_text(), flags=re.M)
        rules.update(zip(chunks[1::2], chunks[2::2], strict=True))
    return rules


def _command(body: str) -> str | None:
    match = re.search(r"-m aam (?:--provenance \{[\w.:]+\} )?([\w-]+)", body)
    return match.group(1) if match else None


def test_each_rule_is_named_after_the_aam_command_it_runs():
    named = {}
    for rule, body in _rules().items():
        command = _command(body)
        if command is None:
            continue
        assert command in COMMANDS, f"rule {rule}: aam {command} is not a command"
        assert SAME_COMMAND.get(rule, rule) == command.replace("-", "_"), (rule, command)
        assert f'code=code("{command}")' in body, f"rule {rule}: no code=code({command!r})"
        named[rule] = command
    assert {
        "stage",
        "tree",
        "unifrac",
        "split",
        "pretrain",
        "finetune",
        "predict",
        "plot_history",
        "profile",
        "profiling_report",
        "validate",
        "baselines",
        "cv_split",
        "learning_curve_split",
        "subset_baselines",
        "cross_validation",
        "learning_curve",
    } <= set(named)


def test_every_rule_that_runs_in_the_image_waits_for_it():
    for rule, body in _rules().items():
        if rule == "build_container":  # makes the image, on the host (`container: None`)
            assert re.search(r"container:\s+None", body)
        elif re.search(r"^\s+(shell|script):", body, flags=re.M):
            assert "image=IMAGE_INPUT" in body, f"rule {rule}: no image=IMAGE_INPUT input"


def test_every_rule_has_a_log_and_a_benchmark_under_its_name():
    for rule, body in _rules().items():
        for directive, root in (("log", "logs"), ("benchmark", "benchmarks")):
            match = re.search(rf"^\s+{directive}:\s+WORK / f?\"{root}/(\w+)/", body, flags=re.M)
            assert match and match.group(1) == rule, (
                f"rule {rule}: {directive} not in {root}/{rule}/"
            )


@pytest.mark.parametrize("profile", ["cosmos", "lumi"])
def test_a_rule_running_another_rules_command_gets_its_resources(profile):
    # The site DAG of test_slurm_profiles has no predict_on dataset: its rules are checked here.
    settings = yaml.safe_load((REPO / f"profiles/{profile}/config.yaml").read_text())
    for rule, namesake in SAME_COMMAND.items():
        if re.search(r"localrule:\s+True", _rules()[rule]):
            continue
        for section in ("set-resources", "set-threads"):
            assert settings[section].get(rule) == settings[section].get(namesake), (rule, section)
            assert settings[section].get(rule) is not None, (rule, section)


def test_every_cluster_job_has_its_resources_in_each_site_profile():
    """A rule that is not a localrule runs as a SLURM job: each site profile sizes it (rule
    build_container sets its own resources in container.smk)."""
    cluster = {
        rule
        for rule, body in _rules().items()
        if "localrule: True" not in body and rule != "build_container"
    }
    assert {"pretrain", "baselines", "subset_baselines"} <= cluster
    for site in ("cosmos", "lumi"):
        profile = yaml.safe_load((REPO / f"profiles/{site}/config.yaml").read_text())
        missing = cluster - set(profile["set-resources"])
        assert not missing, f"profiles/{site}: no set-resources for {sorted(missing)}"
